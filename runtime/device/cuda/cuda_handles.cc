#include "runtime/device/cuda/cuda_handles.h"

#include <cstdint>
#include <limits>

#include "runtime/device/cuda/cuda_status.h"

namespace gpipe::cuda {

absl::StatusOr<Stream> CreateStream() {
  cudaStream_t stream = nullptr;
  GPIPE_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return Stream(stream);
}

absl::StatusOr<Event> CreateEvent(bool timing) {
  cudaEvent_t event = nullptr;
  GPIPE_CUDA_RETURN_IF_ERROR(
      cudaEventCreateWithFlags(&event, timing ? cudaEventDefault : cudaEventDisableTiming));
  return Event(event);
}

absl::StatusOr<MemPool> CreateMemPool(int ordinal) {
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = ordinal;
  cudaMemPool_t raw = nullptr;
  GPIPE_CUDA_RETURN_IF_ERROR(cudaMemPoolCreate(&raw, &props));
  MemPool pool(raw);
  // Without this the pool returns its freed memory to the GPU at every synchronization, and the
  // next micro-batch pays for mapping it again.
  uint64_t threshold = std::numeric_limits<uint64_t>::max();
  GPIPE_CUDA_RETURN_IF_ERROR(
      cudaMemPoolSetAttribute(pool.get(), cudaMemPoolAttrReleaseThreshold, &threshold));
  return pool;
}

absl::StatusOr<CublasHandle> CreateCublas(cudaStream_t stream, bool allow_tf32) {
  cublasHandle_t raw = nullptr;
  GPIPE_CUBLAS_RETURN_IF_ERROR(cublasCreate(&raw));
  CublasHandle handle(raw);
  GPIPE_CUBLAS_RETURN_IF_ERROR(cublasSetStream(handle.get(), stream));
  // fp32 GEMMs issued through the cuBLAS handle take TF32 tensor cores only when the run allows
  // it; cuBLASLt calls choose their compute type per call.
  GPIPE_CUBLAS_RETURN_IF_ERROR(cublasSetMathMode(
      handle.get(), allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  return handle;
}

absl::StatusOr<CublasLtHandle> CreateCublasLt() {
  cublasLtHandle_t raw = nullptr;
  GPIPE_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&raw));
  return CublasLtHandle(raw);
}

absl::StatusOr<CudnnHandle> CreateCudnn(cudaStream_t stream) {
  cudnnHandle_t raw = nullptr;
  GPIPE_CUDNN_RETURN_IF_ERROR(cudnnCreate(&raw));
  CudnnHandle handle(raw);
  GPIPE_CUDNN_RETURN_IF_ERROR(cudnnSetStream(handle.get(), stream));
  return handle;
}

}  // namespace gpipe::cuda

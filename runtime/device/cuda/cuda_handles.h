// Owning wrappers for the CUDA, cuBLAS(Lt) and cuDNN handles a CudaDevice holds, and checked
// factories for them. Each handle is a unique_ptr whose deleter destroys it, so a device whose
// creation fails part-way releases everything created before the failure. Destroying a handle
// cannot report an error to anyone (it runs in destructors); a failure there is ignored, which
// is safe because CUDA releases a stream's or pool's resources once its queued work is done.
#ifndef GPIPE_RUNTIME_DEVICE_CUDA_CUDA_HANDLES_H_
#define GPIPE_RUNTIME_DEVICE_CUDA_CUDA_HANDLES_H_

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <memory>
#include <type_traits>

#include "absl/status/statusor.h"

namespace gpipe::cuda {

struct StreamDeleter {
  void operator()(cudaStream_t stream) const { cudaStreamDestroy(stream); }
};
struct EventDeleter {
  void operator()(cudaEvent_t event) const { cudaEventDestroy(event); }
};
struct MemPoolDeleter {
  void operator()(cudaMemPool_t pool) const { cudaMemPoolDestroy(pool); }
};
struct CublasDeleter {
  void operator()(cublasHandle_t handle) const { cublasDestroy(handle); }
};
struct CublasLtDeleter {
  void operator()(cublasLtHandle_t handle) const { cublasLtDestroy(handle); }
};
struct CudnnDeleter {
  void operator()(cudnnHandle_t handle) const { cudnnDestroy(handle); }
};
struct GraphDeleter {
  void operator()(cudaGraph_t graph) const { cudaGraphDestroy(graph); }
};
struct GraphExecDeleter {
  void operator()(cudaGraphExec_t exec) const { cudaGraphExecDestroy(exec); }
};

// The handle types are pointers to opaque structs; the unique_ptr owns the pointee.
template <typename Handle, typename Deleter>
using OwnedHandle = std::unique_ptr<std::remove_pointer_t<Handle>, Deleter>;

using Stream = OwnedHandle<cudaStream_t, StreamDeleter>;
using Event = OwnedHandle<cudaEvent_t, EventDeleter>;
using MemPool = OwnedHandle<cudaMemPool_t, MemPoolDeleter>;
using CublasHandle = OwnedHandle<cublasHandle_t, CublasDeleter>;
using CublasLtHandle = OwnedHandle<cublasLtHandle_t, CublasLtDeleter>;
using CudnnHandle = OwnedHandle<cudnnHandle_t, CudnnDeleter>;
using Graph = OwnedHandle<cudaGraph_t, GraphDeleter>;
using GraphExec = OwnedHandle<cudaGraphExec_t, GraphExecDeleter>;

// All of these act on the current device (cudaSetDevice first).

// A stream that does not synchronize with the legacy default stream.
absl::StatusOr<Stream> CreateStream();
// `timing`: whether cudaEventElapsedTime may be asked of it (cheaper without).
absl::StatusOr<Event> CreateEvent(bool timing);
// A private pool on device `ordinal` that keeps freed blocks for reuse (release threshold
// UINT64_MAX): the same shapes are allocated every micro-batch.
absl::StatusOr<MemPool> CreateMemPool(int ordinal);
// Library handles, bound to `stream`.
absl::StatusOr<CublasHandle> CreateCublas(cudaStream_t stream, bool allow_tf32);
absl::StatusOr<CublasLtHandle> CreateCublasLt();
absl::StatusOr<CudnnHandle> CreateCudnn(cudaStream_t stream);

}  // namespace gpipe::cuda

#endif  // GPIPE_RUNTIME_DEVICE_CUDA_CUDA_HANDLES_H_

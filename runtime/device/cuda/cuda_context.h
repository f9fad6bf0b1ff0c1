// CudaContext: what every CUDA op family needs, owned by the CudaDevice and set up before its
// ops are built: the GPU, the compute stream every op is issued on, the library handles bound
// to that stream, and where per-call scratch comes from. Ops keep a const reference.
#ifndef GPIPE_RUNTIME_DEVICE_CUDA_CUDA_CONTEXT_H_
#define GPIPE_RUNTIME_DEVICE_CUDA_CUDA_CONTEXT_H_

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "runtime/core/allocator.h"

namespace gpipe {
namespace cuda {
class IdChecks;
}  // namespace cuda

struct CudaContext {
  int ordinal = 0;                  // the CUDA device id (current on the thread that issues)
  int multiprocessors = 0;          // SM count, for sizing grids
  cudaStream_t stream = nullptr;    // the compute stream; every op is issued on it
  cublasHandle_t cublas = nullptr;  // bound to `stream`
  cublasLtHandle_t cublas_lt = nullptr;
  cudnnHandle_t cudnn = nullptr;  // bound to `stream`
  // Per-call scratch (cuBLASLt / cuDNN workspaces, partial sums): Tensor::Empty(*workspace, ...,
  // MemoryKind::kWorkspace). Its storage is freed in stream order, so a scratch tensor may be
  // dropped as soon as the kernels that use it are issued.
  Allocator* workspace = nullptr;
  // Where ops check the ids they index with, without waiting (id_check.h); the device reports
  // what it found after each of its waits.
  cuda::IdChecks* id_checks = nullptr;
  // fp32 GEMMs and convolutions may use TF32 tensor cores (runtime.cuda.allow_tf32).
  bool allow_tf32 = false;
  // Convolution algorithms timed by cuDNN, or its heuristic ranking
  // (runtime.cuda.measure_conv_algorithms).
  bool measure_conv_algorithms = true;
  // Products on cuBLASLt with fused bias and bf16 rounding (runtime.cuda.cublaslt_gemm).
  bool cublaslt_gemm = false;
  // bf16 storage's fused attention on cuDNN (runtime.cuda.cudnn_attention).
  bool cudnn_attention = false;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CUDA_CUDA_CONTEXT_H_

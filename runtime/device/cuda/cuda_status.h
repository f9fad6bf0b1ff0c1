// The one place per library where CUDA runtime, cuBLAS(Lt) and cuDNN return codes become
// absl::Status: the code's name and text, and the call that returned it. The executor adds the
// rank, stage, micro-batch and instruction, and layers their own name, as the error travels up.
#ifndef GPIPE_RUNTIME_DEVICE_CUDA_CUDA_STATUS_H_
#define GPIPE_RUNTIME_DEVICE_CUDA_CUDA_STATUS_H_

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "absl/status/status.h"

namespace gpipe {

// OK for cudaSuccess; otherwise "cuda: <call>: <cudaErrorName> (<text>)", RESOURCE_EXHAUSTED
// for cudaErrorMemoryAllocation, FAILED_PRECONDITION for "no device"/"insufficient driver",
// INTERNAL for the rest.
absl::Status CudaStatus(cudaError_t code, const char* call);
// Likewise for cuBLAS and cuBLASLt ("cublas: <call>: CUBLAS_STATUS_... (<text>)").
absl::Status CublasStatus(cublasStatus_t code, const char* call);
// Likewise for cuDNN ("cudnn: <call>: CUDNN_STATUS_... (<text>)").
absl::Status CudnnStatus(cudnnStatus_t code, const char* call);

}  // namespace gpipe

// Evaluates a CUDA runtime / cuBLAS / cuDNN call and returns its Status from the enclosing
// function when it failed, naming the call as written.
#define GPIPE_CUDA_RETURN_IF_ERROR(call)                                            \
  do {                                                                              \
    if (const absl::Status gpipe_cuda_status_ = ::gpipe::CudaStatus((call), #call); \
        !gpipe_cuda_status_.ok()) {                                                 \
      return gpipe_cuda_status_;                                                    \
    }                                                                               \
  } while (0)
#define GPIPE_CUBLAS_RETURN_IF_ERROR(call)                                            \
  do {                                                                                \
    if (const absl::Status gpipe_cuda_status_ = ::gpipe::CublasStatus((call), #call); \
        !gpipe_cuda_status_.ok()) {                                                   \
      return gpipe_cuda_status_;                                                      \
    }                                                                                 \
  } while (0)
#define GPIPE_CUDNN_RETURN_IF_ERROR(call)                                            \
  do {                                                                               \
    if (const absl::Status gpipe_cuda_status_ = ::gpipe::CudnnStatus((call), #call); \
        !gpipe_cuda_status_.ok()) {                                                  \
      return gpipe_cuda_status_;                                                     \
    }                                                                                \
  } while (0)

#endif  // GPIPE_RUNTIME_DEVICE_CUDA_CUDA_STATUS_H_

#include "runtime/device/cuda/cuda_status.h"

#include "absl/strings/str_cat.h"

namespace gpipe {

absl::Status CudaStatus(cudaError_t code, const char* call) {
  if (code == cudaSuccess) return absl::OkStatus();
  const std::string message = absl::StrCat("cuda: ", call, ": ", cudaGetErrorName(code), " (",
                                           cudaGetErrorString(code), ")");
  switch (code) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
      return absl::FailedPreconditionError(message);
    case cudaErrorInvalidValue:
      return absl::InvalidArgumentError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace gpipe

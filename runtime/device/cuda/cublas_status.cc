#include "absl/strings/str_cat.h"
#include "runtime/device/cuda/cuda_status.h"

namespace gpipe {

absl::Status CublasStatus(cublasStatus_t code, const char* call) {
  if (code == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const std::string message = absl::StrCat("cublas: ", call, ": ", cublasGetStatusName(code), " (",
                                           cublasGetStatusString(code), ")");
  switch (code) {
    case CUBLAS_STATUS_ALLOC_FAILED:
      return absl::ResourceExhaustedError(message);
    case CUBLAS_STATUS_INVALID_VALUE:
      return absl::InvalidArgumentError(message);
    case CUBLAS_STATUS_NOT_SUPPORTED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return absl::UnimplementedError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace gpipe

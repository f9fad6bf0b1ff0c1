#include "absl/strings/str_cat.h"
#include "runtime/device/cuda/cuda_status.h"

namespace gpipe {

absl::Status CudnnStatus(cudnnStatus_t code, const char* call) {
  if (code == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  char detail[256] = {};
  cudnnGetLastErrorString(detail, sizeof(detail));
  const std::string message =
      absl::StrCat("cudnn: ", call, ": ", cudnnGetErrorString(code),
                   detail[0] != '\0' ? absl::StrCat(" (", detail, ")") : "");
  // cuDNN 9 groups its codes by thousands: 2xxx bad parameter, 3xxx not supported, 4xxx
  // internal, 5xxx execution failed.
  if (code == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
      code == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED) {
    return absl::ResourceExhaustedError(message);
  }
  switch (static_cast<int>(code) / 1000) {
    case 2:
      return absl::InvalidArgumentError(message);
    case 3:
      return absl::UnimplementedError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace gpipe

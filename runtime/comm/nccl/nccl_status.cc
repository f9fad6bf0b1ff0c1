#include "runtime/comm/nccl/nccl_status.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace gpipe {

absl::Status NcclStatus(ncclResult_t code, const char* call, ncclComm_t comm) {
  if (code == ncclSuccess || code == ncclInProgress) return absl::OkStatus();
  std::string message = absl::StrCat("nccl: ", call, ": ", ncclGetErrorString(code));
  if (const char* last = ncclGetLastError(comm); last != nullptr && last[0] != '\0') {
    absl::StrAppend(&message, " (", last, ")");
  }
  switch (code) {
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return absl::InvalidArgumentError(message);
    case ncclRemoteError:
    case ncclSystemError:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace gpipe

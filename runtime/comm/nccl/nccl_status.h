// The one place where NCCL return codes become absl::Status: the code's text, the call that
// returned it and NCCL's own last message for the communicator. Callers add the rank, peer and
// transfer as the error travels up.
#ifndef GPIPE_RUNTIME_COMM_NCCL_NCCL_STATUS_H_
#define GPIPE_RUNTIME_COMM_NCCL_NCCL_STATUS_H_

#include <nccl.h>

#include "absl/status/status.h"

namespace gpipe {

// OK for ncclSuccess (and ncclInProgress, which a non-blocking communicator returns for work
// still being set up); otherwise "nccl: <call>: <error text> (<NCCL's last message>)":
// INVALID_ARGUMENT for ncclInvalidArgument and ncclInvalidUsage, UNAVAILABLE for
// ncclRemoteError and ncclSystemError (a peer or the network failed), INTERNAL for the rest.
// `comm` may be null (no communicator yet).
absl::Status NcclStatus(ncclResult_t code, const char* call, ncclComm_t comm = nullptr);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COMM_NCCL_NCCL_STATUS_H_

// What NCCL needs from MPI before it can run: the unique id of a new communicator, handed from
// one member to the others, and every rank's GPU, so that two ranks on one GPU are refused before
// NCCL is asked. Point-to-point and non-blocking on the channel's private MPI communicator, each
// wait under a deadline and the job's abort flag. Internal to comm/nccl.
#ifndef GPIPE_RUNTIME_COMM_NCCL_NCCL_BOOTSTRAP_H_
#define GPIPE_RUNTIME_COMM_NCCL_NCCL_BOOTSTRAP_H_

#include <nccl.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/comm/data_channel_context.h"

namespace gpipe {

// The unique id of a new NCCL communicator of `members` (sorted, this rank among them): made by
// the first member (ncclGetUniqueId) and sent to the others. `description` prefixes errors.
absl::StatusOr<ncclUniqueId> ShareUniqueId(DataChannelContext& context,
                                           const std::vector<int>& members, absl::Time deadline,
                                           const std::string& description);

// Every rank's `placement` ("host node7 GPU 0000:1B:00.0"), indexed by rank. Collective.
absl::StatusOr<std::vector<std::string>> GatherPlacements(DataChannelContext& context,
                                                          const std::string& placement,
                                                          absl::Time deadline);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COMM_NCCL_NCCL_BOOTSTRAP_H_

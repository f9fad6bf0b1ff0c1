// MpiGroupSetup: forms a group of ranks of a data channel's communicator for all-reduces
// (MpiReduceGroup, NcclReduceGroup): checks the group, has its members exchange what they are
// about to reduce, point-to-point and under the deadline, and creates the group's communicator
// (MPI_Comm_create_group). The exchange comes first so that a member that never arrives cannot
// hang the others inside the blocking MPI_Comm_create_group, and members that disagree (group,
// tensor count or sizes) fail with both sides' descriptions instead of corrupting memory.
// Internal to comm/. Thread-compatible.
#ifndef GPIPE_RUNTIME_COMM_MPI_GROUP_SETUP_H_
#define GPIPE_RUNTIME_COMM_MPI_GROUP_SETUP_H_

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/comm/data_channel_context.h"

namespace gpipe {

class MpiGroupSetup {
 public:
  explicit MpiGroupSetup(std::shared_ptr<DataChannelContext> context)
      : context_(std::move(context)) {}

  // `group` sorted: INVALID_ARGUMENT prefixed with `description` when a rank repeats, is
  // outside the job or is not this one.
  absl::Status CheckGroup(const std::vector<int>& group, const std::string& description) const;
  // Exchanges what this member will reduce (element counts per tensor, per bucket) with every
  // other member of `group` (sorted) under `deadline` and compares.
  absl::Status CheckAgreement(const std::vector<std::vector<int64_t>>& buckets,
                              const std::vector<int>& group, absl::Time deadline,
                              const std::string& description);
  // A new communicator of `group` (sorted), collective over its members: call CheckAgreement
  // first, so that every member is known to be here and this cannot hang. The caller owns it
  // (FreeCommunicator).
  absl::StatusOr<MPI_Comm> CreateCommunicator(const std::vector<int>& group);

 private:
  std::shared_ptr<DataChannelContext> context_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COMM_MPI_GROUP_SETUP_H_

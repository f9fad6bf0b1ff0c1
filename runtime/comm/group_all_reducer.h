// GroupAllReducer: sums f32 tensors in place across a group of ranks of a data channel's
// communicator (MPI_Iallreduce on a per-group communicator from MPI_Comm_create_group, cached).
// Before each reduction the members exchange what they are about to reduce, point-to-point and
// under the deadline: a member that never arrives cannot hang the others inside the blocking
// MPI_Comm_create_group, and members that disagree (group, tensor count or sizes) fail with both
// sides' descriptions instead of corrupting memory. Internal to comm/. Thread-compatible.
#ifndef GPIPE_RUNTIME_COMM_GROUP_ALL_REDUCER_H_
#define GPIPE_RUNTIME_COMM_GROUP_ALL_REDUCER_H_

#include <mpi.h>

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/comm/data_channel_context.h"
#include "runtime/core/tensor.h"

namespace gpipe {

class GroupAllReducer {
 public:
  explicit GroupAllReducer(std::shared_ptr<DataChannelContext> context)
      : context_(std::move(context)) {}
  GroupAllReducer(const GroupAllReducer&) = delete;
  GroupAllReducer& operator=(const GroupAllReducer&) = delete;
  ~GroupAllReducer();

  // See DataChannel::AllReduceSum. `group_ranks` may come in any order (they are sorted);
  // it must hold this rank and no rank twice.
  absl::Status AllReduceSum(std::span<Tensor> tensors, std::span<const int> group_ranks,
                            absl::Time deadline);

  // Communicators created so far (one per distinct group of two or more ranks).
  int cached_groups() const { return static_cast<int>(communicators_.size()); }

  // For groups made once and used many times (MpiReduceGroup). `group` sorted: INVALID_ARGUMENT
  // prefixed with `description` when a rank repeats, is outside the job or is not this one.
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
  absl::StatusOr<MPI_Comm> GroupCommunicator(const std::vector<int>& group);

  std::shared_ptr<DataChannelContext> context_;
  std::map<std::vector<int>, MPI_Comm> communicators_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COMM_GROUP_ALL_REDUCER_H_

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

 private:
  // Exchanges the reduction's description with every other member and compares.
  absl::Status CheckAgreement(std::span<const Tensor> tensors, const std::vector<int>& group,
                              absl::Time deadline, const std::string& description);
  absl::StatusOr<MPI_Comm> GroupCommunicator(const std::vector<int>& group);

  std::shared_ptr<DataChannelContext> context_;
  std::map<std::vector<int>, MPI_Comm> communicators_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COMM_GROUP_ALL_REDUCER_H_

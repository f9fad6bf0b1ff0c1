// MpiReduceGroup: a ReduceGroup over MPI. Created collectively (the members first agree on the
// ranks and the bucket layout, point-to-point under the deadline, then build the group's own
// communicator with MPI_Comm_create_group). A start posts one collective per tensor of the bucket
// on host tensors (MPI_Iallreduce in place; MPI_Ireduce_scatter from a copy into the member's
// part; MPI_Iallgatherv in place) and returns at once; the handle's Done() tests (and so
// progresses) them. After a failed or abandoned reduction the communicator is unusable: the
// group refuses further starts. Internal to comm/. Thread-compatible.
#ifndef GPIPE_RUNTIME_COMM_MPI_REDUCE_GROUP_H_
#define GPIPE_RUNTIME_COMM_MPI_REDUCE_GROUP_H_

#include <mpi.h>

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/comm/data_channel.h"
#include "runtime/comm/data_channel_context.h"
#include "runtime/comm/mpi_group_setup.h"
#include "runtime/comm/reduce_group.h"

namespace gpipe {

class MpiReduceGroup final : public ReduceGroup {
 public:
  // See DataChannel::CreateReduceGroup; `group_setup` makes the agreement and the communicator.
  static absl::StatusOr<std::unique_ptr<ReduceGroup>> Create(
      std::shared_ptr<DataChannelContext> context, MpiGroupSetup& group_setup,
      std::span<const int> group_ranks, std::vector<std::vector<int64_t>> buckets,
      absl::Time deadline);
  ~MpiReduceGroup() override;

  absl::StatusOr<std::unique_ptr<TransferHandle>> StartCollective(
      Collective collective, int bucket, std::span<Tensor> tensors) override;
  const std::vector<std::vector<int64_t>>& buckets() const override { return layout_.buckets(); }

  // Shared with the handles: the communicator and whether a reduction on it failed.
  struct State {
    MPI_Comm comm = MPI_COMM_NULL;
    int member = 0;  // this rank's place among the members, by rank
    int members = 1;
    bool broken = false;
  };

 private:
  MpiReduceGroup(std::shared_ptr<DataChannelContext> context, std::shared_ptr<State> state,
                 ReduceGroupLayout layout, std::string description)
      : context_(std::move(context)),
        state_(std::move(state)),
        layout_(std::move(layout)),
        description_(std::move(description)) {}

  std::shared_ptr<DataChannelContext> context_;
  std::shared_ptr<State> state_;
  ReduceGroupLayout layout_;
  std::string description_;  // "rank 2 all-reducing gradient buckets over ranks [0, 2]"
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COMM_MPI_REDUCE_GROUP_H_

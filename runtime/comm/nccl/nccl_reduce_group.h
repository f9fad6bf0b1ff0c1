// NcclReduceGroup: a ReduceGroup over its own NCCL communicator. Created at set-up by every
// member: the members agree on the ranks and bucket layout over MPI (MpiGroupSetup, under the
// deadline), the first member's unique id reaches the others, the communicator is initialized
// and connected by a one-element all-reduce, all before the first step. Start issues one
// ncclAllReduce per tensor of the bucket, in place and in one group, on the group's stream after
// the compute stream's work so far, and returns at once: the all-reduce overlaps the rest of the
// backward. Every member gets the same bits (NCCL's reduction order does not depend on the
// rank). After a failed or abandoned reduction the communicator is aborted and the group refuses
// further starts. Internal to comm/nccl. Thread-compatible.
#ifndef GPIPE_RUNTIME_COMM_NCCL_NCCL_REDUCE_GROUP_H_
#define GPIPE_RUNTIME_COMM_NCCL_NCCL_REDUCE_GROUP_H_

#include <cuda_runtime_api.h>

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/comm/data_channel.h"
#include "runtime/comm/data_channel_context.h"
#include "runtime/comm/mpi_group_setup.h"
#include "runtime/comm/nccl/nccl_communicator.h"
#include "runtime/comm/reduce_group.h"

namespace gpipe {

class NcclReduceGroup final : public ReduceGroup {
 public:
  // See DataChannel::CreateReduceGroup. Any group size, one included (a one-rank communicator:
  // the channel gives groups of one a SoloReduceGroup instead; tests use this to run the NCCL
  // path on one GPU). `issue_timeout` bounds each start's issue.
  static absl::StatusOr<std::unique_ptr<NcclReduceGroup>> Create(
      DataChannelContext& context, MpiGroupSetup& group_setup, cudaStream_t compute_stream,
      std::span<const int> group_ranks, std::vector<std::vector<int64_t>> buckets,
      absl::Time deadline, absl::Duration issue_timeout);

  // Device f32 tensors of the bucket's element counts.
  absl::StatusOr<std::unique_ptr<TransferHandle>> StartCollective(
      Collective collective, int bucket, std::span<Tensor> tensors) override;
  const std::vector<std::vector<int64_t>>& buckets() const override { return layout_.buckets(); }

 private:
  NcclReduceGroup(std::shared_ptr<NcclCommunicator> communicator, cudaStream_t compute_stream,
                  ReduceGroupLayout layout, std::string description, absl::Duration issue_timeout,
                  int member, int members)
      : communicator_(std::move(communicator)),
        compute_stream_(compute_stream),
        layout_(std::move(layout)),
        description_(std::move(description)),
        issue_timeout_(issue_timeout),
        member_(member),
        members_(members) {}
  // One tensor's part of a start, inside the start's NCCL group.
  ncclResult_t IssueOne(Collective collective, Tensor& tensor) const;

  std::shared_ptr<NcclCommunicator> communicator_;
  cudaStream_t compute_stream_;
  ReduceGroupLayout layout_;
  std::string description_;  // "rank 2 all-reducing gradient buckets over ranks [0, 2] (NCCL)"
  absl::Duration issue_timeout_;
  int member_;  // this rank's place among the members, by rank (its NCCL rank)
  int members_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COMM_NCCL_NCCL_REDUCE_GROUP_H_

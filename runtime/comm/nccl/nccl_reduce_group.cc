#include "runtime/comm/nccl/nccl_reduce_group.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/comm/nccl/nccl_bootstrap.h"
#include "runtime/comm/nccl/nccl_transfer.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/cuda/cuda_status.h"

namespace gpipe {

absl::StatusOr<std::unique_ptr<NcclReduceGroup>> NcclReduceGroup::Create(
    DataChannelContext& context, MpiGroupSetup& group_setup, cudaStream_t compute_stream,
    std::span<const int> group_ranks, std::vector<std::vector<int64_t>> buckets,
    absl::Time deadline, absl::Duration issue_timeout) {
  context.orphans.Reap();
  std::vector<int> group(group_ranks.begin(), group_ranks.end());
  std::sort(group.begin(), group.end());
  std::string description =
      absl::StrCat("rank ", context.rank, " all-reducing gradient buckets over ranks [",
                   absl::StrJoin(group, ", "), "] (NCCL)");
  RETURN_IF_ERROR(group_setup.CheckGroup(group, description));
  absl::StatusOr<ReduceGroupLayout> layout = ReduceGroupLayout::Create(std::move(buckets));
  if (!layout.ok()) return WithContext(layout.status(), description);
  if (group.size() > 1) {
    RETURN_IF_ERROR(group_setup.CheckAgreement(layout->buckets(), group, deadline, description));
  }
  ASSIGN_OR_RETURN(const ncclUniqueId id, ShareUniqueId(context, group, deadline, description));
  const int member =
      static_cast<int>(std::find(group.begin(), group.end(), context.rank) - group.begin());
  ASSIGN_OR_RETURN(std::shared_ptr<NcclCommunicator> communicator,
                   NcclCommunicator::Create(id, static_cast<int>(group.size()), member, deadline,
                                            NcclCommunicator::Options{
                                                .description = description,
                                                .abort_poller = context.abort_poller,
                                                .clock = context.external_clock,
                                            }));
  RETURN_IF_ERROR(ConnectNow(
      communicator,
      [&](float* probe) {
        return ncclAllReduce(probe, probe, 1, ncclFloat32, ncclSum, communicator->comm(),
                             communicator->stream());
      },
      deadline));
  return std::unique_ptr<NcclReduceGroup>(
      new NcclReduceGroup(std::move(communicator), compute_stream, *std::move(layout),
                          std::move(description), issue_timeout));
}

absl::StatusOr<std::unique_ptr<TransferHandle>> NcclReduceGroup::Start(int bucket,
                                                                       std::span<Tensor> tensors) {
  if (communicator_->aborted()) {
    return absl::FailedPreconditionError(absl::StrCat(
        description_, ": an earlier reduction on this group failed; the group is unusable"));
  }
  RETURN_IF_ERROR(layout_.Advance(bucket, tensors, description_));
  for (const Tensor& tensor : tensors) {
    if (tensor.allocator().host_accessible()) {
      return absl::FailedPreconditionError(
          absl::StrCat(description_, ": NCCL reduces device tensors; this one is in host memory"));
    }
  }
  const std::string what = absl::StrCat(description_, " (bucket ", bucket, ")");
  RETURN_IF_ERROR(WithContext(communicator_->After(compute_stream_), what));
  RETURN_IF_ERROR(communicator_->Issue(
      [&] {
        for (Tensor& tensor : tensors) {
          const ncclResult_t result = ncclAllReduce(
              tensor.raw_data(), tensor.raw_data(), static_cast<size_t>(tensor.num_elements()),
              ncclFloat32, ncclSum, communicator_->comm(), communicator_->stream());
          if (result != ncclSuccess) return result;
        }
        return ncclSuccess;
      },
      communicator_->clock().Now() + issue_timeout_));
  ASSIGN_OR_RETURN(cuda::Event done, communicator_->Record());
  auto kept = std::make_shared<std::vector<Tensor>>(tensors.begin(), tensors.end());
  return std::unique_ptr<TransferHandle>(std::make_unique<NcclTransferHandle>(
      communicator_, std::nullopt, NcclMilestone{std::move(done), {}}, std::move(kept), what));
}

}  // namespace gpipe

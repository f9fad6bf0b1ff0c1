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
  return std::unique_ptr<NcclReduceGroup>(new NcclReduceGroup(
      std::move(communicator), compute_stream, *std::move(layout), std::move(description),
      issue_timeout, member, static_cast<int>(group.size())));
}

absl::StatusOr<std::unique_ptr<TransferHandle>> NcclReduceGroup::StartCollective(
    Collective collective, int bucket, std::span<Tensor> tensors) {
  if (communicator_->aborted()) {
    return absl::FailedPreconditionError(absl::StrCat(
        description_, ": an earlier reduction on this group failed; the group is unusable"));
  }
  RETURN_IF_ERROR(layout_.Advance(collective, bucket, tensors, description_));
  for (const Tensor& tensor : tensors) {
    if (tensor.allocator().host_accessible()) {
      return absl::FailedPreconditionError(
          absl::StrCat(description_, ": NCCL reduces device tensors; this one is in host memory"));
    }
  }
  const std::string what =
      absl::StrCat(description_, " (", CollectiveName(collective), " of bucket ", bucket, ")");
  RETURN_IF_ERROR(WithContext(communicator_->After(compute_stream_), what));
  RETURN_IF_ERROR(communicator_->Issue(
      [&] {
        for (Tensor& tensor : tensors) {
          const ncclResult_t result = IssueOne(collective, tensor);
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

ncclResult_t NcclReduceGroup::IssueOne(Collective collective, Tensor& tensor) const {
  float* data = static_cast<float*>(tensor.raw_data());
  const size_t elements = static_cast<size_t>(tensor.num_elements());
  ncclComm_t comm = communicator_->comm();
  cudaStream_t stream = communicator_->stream();
  if (collective == Collective::kAllReduce) {
    return ncclAllReduce(data, data, elements, ncclFloat32, ncclSum, comm, stream);
  }
  // ShardRange's parts: `part` elements per member in place, the remainder the last member's.
  const size_t members = static_cast<size_t>(members_);
  const size_t part = elements / members;
  float* own = data + part * static_cast<size_t>(member_);
  float* rest = data + part * members;
  const size_t remainder = elements - part * members;
  const int last = members_ - 1;
  ncclResult_t result = ncclSuccess;
  if (collective == Collective::kReduceScatter) {
    if (part > 0) result = ncclReduceScatter(data, own, part, ncclFloat32, ncclSum, comm, stream);
    if (result == ncclSuccess && remainder > 0) {
      result = ncclReduce(rest, rest, remainder, ncclFloat32, ncclSum, last, comm, stream);
    }
    return result;
  }
  if (part > 0) result = ncclAllGather(own, data, part, ncclFloat32, comm, stream);
  if (result == ncclSuccess && remainder > 0) {
    result = ncclBroadcast(rest, rest, remainder, ncclFloat32, last, comm, stream);
  }
  return result;
}

}  // namespace gpipe

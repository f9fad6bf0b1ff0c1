#include "runtime/comm/reduce_group.h"

#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/core/status_macros.h"

namespace gpipe {

absl::StatusOr<ReduceGroupLayout> ReduceGroupLayout::Create(
    std::vector<std::vector<int64_t>> buckets) {
  if (buckets.empty()) return absl::InvalidArgumentError("a reduce group needs >= 1 bucket");
  for (size_t b = 0; b < buckets.size(); ++b) {
    if (buckets[b].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("bucket ", b, " of a reduce group is empty"));
    }
    for (int64_t count : buckets[b]) {
      if (count < 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "bucket ", b, " of a reduce group has a tensor of ", count, " elements (>= 1 needed)"));
      }
    }
  }
  return ReduceGroupLayout(std::move(buckets));
}

int64_t ReduceGroupLayout::BucketElements(int bucket) const {
  return std::accumulate(buckets_[bucket].begin(), buckets_[bucket].end(), int64_t{0});
}

int64_t ReduceGroupLayout::TotalElements() const {
  int64_t total = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) total += BucketElements(static_cast<int>(b));
  return total;
}

absl::Status ReduceGroupLayout::Advance(Collective collective, int bucket,
                                        std::span<const Tensor> tensors,
                                        const std::string& description) {
  const bool gather = collective == Collective::kAllGather;
  const int count = static_cast<int>(buckets_.size());
  if (bucket < 0 || bucket >= count) {
    return absl::InvalidArgumentError(
        absl::StrCat(description, ": bucket ", bucket, " of a group of ", count, " buckets"));
  }
  if (!gather && bucket != next_reduce_) {
    return absl::FailedPreconditionError(
        absl::StrCat(description, ": ", CollectiveName(collective), " of bucket ", bucket,
                     " started while bucket ", next_reduce_,
                     " is next (every member starts the reductions in ascending bucket order)"));
  }
  if (gather && bucket >= gather_below_) {
    return absl::FailedPreconditionError(absl::StrCat(
        description, ": all-gather of bucket ", bucket, " started after that of bucket ",
        gather_below_,
        " (every member starts the gathers in descending bucket order, each once after the "
        "step's reductions)"));
  }
  const std::vector<int64_t>& expected = buckets_[bucket];
  std::vector<int64_t> got;
  for (const Tensor& tensor : tensors) {
    if (!tensor.defined() || tensor.dtype() != DType::kF32) {
      return absl::InvalidArgumentError(absl::StrCat(
          description, ": bucket ", bucket, " holds f32 tensors, got ", tensor.DebugString()));
    }
    got.push_back(tensor.num_elements());
  }
  if (got != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat(description, ": bucket ", bucket, " was created for tensors of [",
                     absl::StrJoin(expected, ", "), "] elements, started with [",
                     absl::StrJoin(got, ", "), "]"));
  }
  if (gather) {
    gather_below_ = bucket;
    return absl::OkStatus();
  }
  next_reduce_ = (bucket + 1) % count;
  // A step's gathers follow its reductions and may leave buckets out (the buffers bucket is
  // reduced, never gathered): each step's reductions begin a new round of gathers.
  if (bucket == 0) gather_below_ = count;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ReduceGroup>> SoloReduceGroup::Create(
    int rank, std::vector<std::vector<int64_t>> buckets) {
  ASSIGN_OR_RETURN(ReduceGroupLayout layout, ReduceGroupLayout::Create(std::move(buckets)));
  return std::unique_ptr<ReduceGroup>(new SoloReduceGroup(rank, std::move(layout)));
}

absl::StatusOr<std::unique_ptr<TransferHandle>> SoloReduceGroup::StartCollective(
    Collective collective, int bucket, std::span<Tensor> tensors) {
  RETURN_IF_ERROR(layout_.Advance(
      collective, bucket, tensors,
      absl::StrCat("rank ", rank_, " running a ", CollectiveName(collective), " alone")));
  return std::unique_ptr<TransferHandle>(std::make_unique<CompletedHandle>());
}

}  // namespace gpipe

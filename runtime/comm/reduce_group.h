// What every ReduceGroup implementation shares: the bucket layout with its per-step order and
// the checks of each start (ReduceGroupLayout), a handle that is done at once, and the group of
// one rank, which sums nothing. MPI-free.
#ifndef GPIPE_RUNTIME_COMM_REDUCE_GROUP_H_
#define GPIPE_RUNTIME_COMM_REDUCE_GROUP_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/comm/data_channel.h"

namespace gpipe {

// A group's buckets (element counts per tensor, per bucket) and which bucket may start next: the
// reductions (all-reduce, reduce-scatter) in ascending bucket order, round after round; the
// all-gathers in descending order, each bucket at most once between two rounds of reductions
// (a sharded optimizer step gathers the buckets it updated, the first layers' first, since
// buckets are cut from the last layers and the next forward needs the first layers first).
class ReduceGroupLayout {
 public:
  // INVALID_ARGUMENT for an empty layout, an empty bucket or a count < 1.
  static absl::StatusOr<ReduceGroupLayout> Create(std::vector<std::vector<int64_t>> buckets);

  const std::vector<std::vector<int64_t>>& buckets() const { return buckets_; }
  int64_t BucketElements(int bucket) const;
  int64_t TotalElements() const;

  // Checks a start of `collective` on `bucket` with `tensors` (the next bucket in that
  // collective's order, defined f32 tensors of the bucket's counts) and moves the order on;
  // FAILED_PRECONDITION or INVALID_ARGUMENT prefixed with `description` otherwise.
  absl::Status Advance(Collective collective, int bucket, std::span<const Tensor> tensors,
                       const std::string& description);

 private:
  explicit ReduceGroupLayout(std::vector<std::vector<int64_t>> buckets)
      : buckets_(std::move(buckets)), gather_below_(static_cast<int>(buckets_.size())) {}
  std::vector<std::vector<int64_t>> buckets_;
  int next_reduce_ = 0;
  int gather_below_;  // the next gather's bucket is below this (buckets_.size(): any)
};

// A handle whose transfer finished before it was made.
class CompletedHandle final : public TransferHandle {
 public:
  bool Done() override { return true; }
  absl::Status Wait(absl::Time) override { return absl::OkStatus(); }
};

// The group of one rank: checks each start like any group, sums and moves nothing (it owns every
// element).
class SoloReduceGroup final : public ReduceGroup {
 public:
  static absl::StatusOr<std::unique_ptr<ReduceGroup>> Create(
      int rank, std::vector<std::vector<int64_t>> buckets);
  absl::StatusOr<std::unique_ptr<TransferHandle>> StartCollective(
      Collective collective, int bucket, std::span<Tensor> tensors) override;
  const std::vector<std::vector<int64_t>>& buckets() const override { return layout_.buckets(); }

 private:
  SoloReduceGroup(int rank, ReduceGroupLayout layout) : rank_(rank), layout_(std::move(layout)) {}
  int rank_;
  ReduceGroupLayout layout_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COMM_REDUCE_GROUP_H_

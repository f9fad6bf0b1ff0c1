// ElementRange: a contiguous range of a tensor's elements in row-major order, and the one rule
// that cuts a tensor into the parts of a group's members (training.shard_optimizer_state: each
// data-parallel replica owns one part of every parameter, of its gradient and of its optimizer
// state). The collectives (comm/), the optimizer and the checkpoints all use ShardRange, so they
// agree on the parts by construction.
#ifndef GPIPE_RUNTIME_CORE_ELEMENT_RANGE_H_
#define GPIPE_RUNTIME_CORE_ELEMENT_RANGE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/core/tensor.h"

namespace gpipe {

struct ElementRange {
  int64_t begin = 0;
  int64_t end = 0;

  int64_t size() const { return end - begin; }
  bool empty() const { return end <= begin; }
  bool operator==(const ElementRange&) const = default;
  std::string ToString() const;  // "[begin, end)"
};

// The part of a tensor of `elements` that member `member` of `members` owns: members before the
// last own elements / members each (rounded down), in member order; the last also owns the
// remainder (fewer than `members` elements), so a tensor smaller than the group belongs to the
// last member whole. Equal parts let NCCL reduce-scatter and all-gather in place; the remainder
// moves by a reduce to and a broadcast from the last member. Requires 0 <= member < members.
ElementRange ShardRange(int64_t elements, int members, int member);

// A view of `range` of `tensor`'s elements (sharing its storage), 1-D; for a tensor of rank >= 2
// shaped [1, size] so that rules that depend on a parameter's rank (AdamW's decay_only_matrices)
// treat the part like the whole. INVALID_ARGUMENT for an empty or out-of-range range.
absl::StatusOr<Tensor> ElementView(const Tensor& tensor, ElementRange range);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CORE_ELEMENT_RANGE_H_

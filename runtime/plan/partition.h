// BalancePartition: cuts a sequence of per-layer costs into contiguous, non-empty stages so that
// the most expensive stage is as cheap as possible (exact, by dynamic programming).
//
// Tie-break (deterministic): among all optimal partitions, the one whose stage start indices are
// lexicographically largest, i.e. each boundary as late as it can be. So zero-cost layers
// (activations) stay with the layer before them, and earlier stages take the extra layer.
#ifndef GPIPE_RUNTIME_PLAN_PARTITION_H_
#define GPIPE_RUNTIME_PLAN_PARTITION_H_

#include <span>
#include <vector>

#include "absl/status/statusor.h"

namespace gpipe {

// Returns the first layer index of each stage (size == stages, [0] == 0, strictly increasing).
// INVALID_ARGUMENT when stages is not in [1, costs.size()] or a cost is negative or not finite.
// O(stages * L^2) time, O(stages * L) memory. Stage sums are compared as computed from prefix
// sums, so ties are exact for integer-valued costs below 2^53 (parameter counts, FLOPs).
absl::StatusOr<std::vector<int>> BalancePartition(std::span<const double> costs, int stages);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_PLAN_PARTITION_H_

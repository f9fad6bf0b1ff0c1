// PartitionForStepTime: cuts a sequence of layers into K contiguous, non-empty stages so that
// the pipeline's predicted step time is as small as possible while every stage fits a memory
// limit (exact for contiguous partitions).
//
// The time model is the flow shop of M identical micro-batches through K stages, which is what
// the schedule simulator reproduces for fill-drain and 1F1B programs when every stage's forward
// and backward keep their ratio: a step takes
//     sum over stages of T_s  +  sum over cuts of c_cut  +  (M - 1) * max over stages of T_s,
// where T_s is the stage's time per micro-batch (forward + backward, recompute included) and
// c_cut the time a boundary adds to the pipeline's fill and drain (its activation and gradient
// transfers). The first term does not depend on the partition, so the partitioner minimizes
//     objective = (M - 1) * bottleneck + cut cost.
// Memory of stage s over layers [j, t):
//     sum of fixed_bytes  +  live[s] * (input_bytes[j] + sum of saved_bytes)
//       +  input_once_bytes[j]  +  max work_bytes,
// fixed = parameters, gradients and optimizer state; saved = what one micro-batch keeps for the
// backward (0 for layers whose activations are recomputed); input = the stage input kept per
// micro-batch; live[s] = the most micro-batches the schedule keeps alive on stage s (GPipe: M;
// 1F1B: min(M, K - s)); input_once = what a stage starting there holds once (receive buffers
// posted ahead, the input's gradient); work = a layer's transient peak while it runs, or what it
// holds when it ends a stage (its output's gradient buffers), taken as the stage's largest so
// memory only grows with the stage.
//
// Exact: every distinct stage time is tried as the bottleneck cap in increasing order; for each,
// a dynamic program over (stage, first layer) finds the cheapest cuts under the cap and the
// memory limit; the search stops once (M - 1) * cap alone reaches the best objective found. Ties
// go to the smaller bottleneck, then to the later boundaries.
#ifndef GPIPE_RUNTIME_PLAN_TIMED_PARTITION_H_
#define GPIPE_RUNTIME_PLAN_TIMED_PARTITION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace gpipe {

struct PartitionLayer {
  double time = 0;        // forward + backward per micro-batch (>= 0, finite)
  double cut_before = 0;  // added fill-and-drain time when a stage starts at this layer
  int64_t fixed_bytes = 0;
  int64_t saved_bytes = 0;       // per live micro-batch
  int64_t input_bytes = 0;       // per live micro-batch, when a stage starts at this layer
  int64_t input_once_bytes = 0;  // once, when a stage starts at this layer
  int64_t work_bytes = 0;        // transient, while this layer runs
};

struct PartitionProblem {
  std::vector<PartitionLayer> layers;
  int stages = 1;
  int micro_batches = 1;
  std::vector<int> live;     // per stage (size == stages), each >= 1
  int64_t memory_limit = 0;  // bytes per stage; 0: no limit
};

struct PartitionChoice {
  std::vector<int> starts;  // first layer of each stage: size == stages, [0] == 0, increasing
  double bottleneck = 0;    // the largest stage time
  double cut_cost = 0;      // the chosen boundaries' cut_before, summed
  double objective = 0;     // (micro_batches - 1) * bottleneck + cut_cost
  std::vector<int64_t> stage_bytes;  // each stage's memory under the model above
};

// INVALID_ARGUMENT for a malformed problem (stages outside [1, layers], negative or non-finite
// costs, negative bytes, live of the wrong size or below 1); RESOURCE_EXHAUSTED when no
// partition keeps every stage within memory_limit, naming the limit and the least memory any
// partition needs on its fullest stage.
absl::StatusOr<PartitionChoice> PartitionForStepTime(const PartitionProblem& problem);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_PLAN_TIMED_PARTITION_H_

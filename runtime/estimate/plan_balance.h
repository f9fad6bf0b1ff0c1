// `gpipe-plan balance`: chooses a plan's stage boundaries by measured cost and memory. Layer
// times come from the simulated device's cost table (runtime.sim: layer_costs, a profile of a
// real device written by `gpipe-plan profile`, or FLOPs at peak_gflops), per-layer bytes from
// the layers' own declarations, the micro-batches each stage keeps alive from the schedule's
// simulation; PartitionForStepTime (runtime/plan/timed_partition.h) then picks the contiguous
// partition with the least predicted step time whose stages fit the memory limit. Every
// candidate (this one, balance PARAMETERS, balance FLOPS, equal layer counts) is then predicted
// by the same simulator and activation-memory replay as `gpipe-plan show`, side by side, and
// the fastest that fits is chosen. When the replay finds the partitioner's choice over the limit
// (its model leaves out gradient buffers in flight), the partitioner runs again with a lower
// limit.
#ifndef GPIPE_RUNTIME_ESTIMATE_PLAN_BALANCE_H_
#define GPIPE_RUNTIME_ESTIMATE_PLAN_BALANCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "layers/registry.h"
#include "proto/plan.pb.h"
#include "runtime/plan/plan_loader.h"

namespace gpipe {

struct BalanceOptions {
  int stages = 0;            // K; 0: the plan's pipeline.stages
  int64_t memory_limit = 0;  // bytes per stage; 0: none
};

// One way to cut the model, as `gpipe-plan show` would predict it.
struct BalanceCandidate {
  std::string method;                     // "measured cost", "balance PARAMETERS", ...
  std::vector<int> starts;                // first layer of each stage
  std::vector<std::string> first_layers;  // their names
  double step_ms = 0;                     // simulated step time with runtime.sim's costs
  std::vector<int64_t> stage_bytes;       // predicted peak per stage: parameters, gradients,
                                          // optimizer state, activations
  bool fits = true;                       // every stage within the limit (always, without one)
};

struct BalanceResult {
  pb::Plan plan;  // the input plan with pipeline.stages and the chosen boundaries
  // [0] is the partitioner's; then balance PARAMETERS, balance FLOPS, equal layer counts.
  std::vector<BalanceCandidate> candidates;
  // The fastest candidate that fits by the simulation (the partitioner's on ties; the flow-shop
  // model it optimizes and the schedule's simulation may differ by a little).
  size_t chosen = 0;
  // No partition fit with the plan's pipeline.offload KEEP_ON_DEVICE, and one does with
  // STAGE_INPUTS (re-materializing plans only): `plan` and the candidates have it set.
  bool offload_chosen = false;
};

// INVALID_ARGUMENT for plans it cannot balance (interleaved stages, K outside [1, layers]);
// RESOURCE_EXHAUSTED when no partition fits the limit (naming the least the fullest stage
// needs), with the stage inputs offloaded too when the plan re-materializes.
absl::StatusOr<BalanceResult> BalancePlan(const LoadedPlan& loaded, const LayerRegistry& registry,
                                          const BalanceOptions& options);

// pipeline.balance: PROFILE without explicit boundaries: sets pipeline.boundaries (and
// pipeline.offload, when BalancePlan had to choose it) to what BalancePlan chooses for the plan's
// stages under runtime.memory_limit_bytes (errors carry the location of pipeline.balance). Other
// plans are left as they are. Every entry point runs it before AnalyzePlan, so rank 0, gpipe-run
// and gpipe-plan see the same partition.
absl::Status ResolveProfileBalance(LoadedPlan& loaded, const LayerRegistry& registry);

// The candidates as a table, and the chosen boundaries as a plan override.
std::string FormatBalance(const BalanceResult& result, int64_t memory_limit);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_ESTIMATE_PLAN_BALANCE_H_

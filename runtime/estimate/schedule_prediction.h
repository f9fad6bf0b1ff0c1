// What a plan's schedule is predicted to do, before anything runs: the schedule built and
// simulated (FLOP costs, or runtime.sim's costs in ms on the simulated device), each stage's
// activation memory from the replay of its instructions, and the bytes its parameters, their
// gradients and optimizer state take. `gpipe-plan show`/`balance` print these; rank 0 sends
// each rank its stage's figures (pb::StageMemory) to compare against what it measures.
#ifndef GPIPE_RUNTIME_ESTIMATE_SCHEDULE_PREDICTION_H_
#define GPIPE_RUNTIME_ESTIMATE_SCHEDULE_PREDICTION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "layers/registry.h"
#include "proto/control.pb.h"
#include "proto/plan.pb.h"
#include "runtime/estimate/activation_memory.h"
#include "runtime/plan/analyzed_plan.h"
#include "runtime/schedule/program.h"
#include "runtime/schedule/verifier.h"

namespace gpipe {

// The schedule of an analyzed plan, simulated, with its predicted memory.
struct SchedulePrediction {
  schedule::Program program;
  schedule::VerifyResult simulation;               // costs from the parts' FLOPs
  std::vector<StageActivationMemory> activations;  // per stage
  // Per stage: values, gradients, optimizer state (and the bf16 product copies under BF16).
  std::vector<int64_t> parameter_bytes;
  std::vector<int64_t> optimizer_bytes;            // per stage: the optimizer state among them
};

// Optimizer state elements per parameter element (SGD with momentum 1, Adam and AdamW 2).
int OptimizerStateFactor(const pb::Optimizer& optimizer);
// The optimizer state bytes one rank holds per parameter element of its stage: f32 elements of
// OptimizerStateFactor, divided over the data-parallel replicas under
// training.shard_optimizer_state (each replica keeps the state of 1/D of every parameter).
double OptimizerBytesPerElement(const pb::Plan& plan);
// Its parameters' bytes on one rank of a stage with `parameters` parameter elements, of which
// `product_parameters` only enter matrix products: f32 values and gradients, the optimizer state,
// and under training.precision BF16 a bf16 copy of each product operand (ParameterStore).
double ParameterBytes(const pb::Plan& plan, int64_t parameters, int64_t product_parameters);

absl::StatusOr<SchedulePrediction> PredictSchedule(const AnalyzedPlan& plan,
                                                   const LayerRegistry& registry);

// Per stage: what gpipe-plan show predicts. Parameter bytes are counted in double first: a model
// whose parameters alone exceed 2^62 bytes gets that (saturated) and no activation estimate.
absl::StatusOr<std::vector<pb::StageMemory>> PredictStageMemory(const AnalyzedPlan& plan,
                                                                const LayerRegistry& registry);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_ESTIMATE_SCHEDULE_PREDICTION_H_

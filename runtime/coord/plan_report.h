// What `gpipe-plan check` and `gpipe-plan show` print about a valid plan: the stage table, and
// (show) the schedule grid with the simulated step time and bubble, and each stage's predicted
// peak memory by kind; `show --compare` adds the same figures for every schedule the plan's
// shape allows, side by side.
#ifndef GPIPE_RUNTIME_COORD_PLAN_REPORT_H_
#define GPIPE_RUNTIME_COORD_PLAN_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "layers/registry.h"
#include "runtime/estimate/activation_memory.h"
#include "runtime/plan/plan_analysis.h"
#include "runtime/plan/plan_loader.h"
#include "runtime/schedule/program.h"
#include "runtime/schedule/verifier.h"

namespace gpipe {

// The schedule of an analyzed plan, simulated, with its predicted memory.
struct SchedulePrediction {
  schedule::Program program;
  schedule::VerifyResult simulation;               // costs from the parts' FLOPs
  std::vector<StageActivationMemory> activations;  // per stage
  std::vector<int64_t> parameter_bytes;            // per stage: values, gradients, optimizer
};

// Optimizer state elements per parameter element (SGD with momentum 1, Adam and AdamW 2).
int OptimizerStateFactor(const pb::Optimizer& optimizer);

absl::StatusOr<SchedulePrediction> PredictSchedule(const AnalyzedPlan& plan,
                                                   const LayerRegistry& registry);

absl::StatusOr<std::string> FormatPlanReport(const AnalyzedPlan& plan,
                                             const LayerRegistry& registry, bool with_schedule);

// One row per training schedule that fits the plan's stages and micro-batches (interleaved with
// the plan's virtual_stages, or 2 when the plan does not interleave): simulated step time,
// bubble, peak live micro-batches and predicted peak memory of the fullest stage.
absl::StatusOr<std::string> FormatScheduleComparison(const LoadedPlan& loaded,
                                                     const LayerRegistry& registry);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COORD_PLAN_REPORT_H_

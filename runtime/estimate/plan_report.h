// What `gpipe-plan check` and `gpipe-plan show` print about a valid plan: the stage table, and
// (show) the schedule grid with the simulated step time and bubble, and each stage's predicted
// peak memory by kind; `show --compare` adds the same figures for every schedule the plan's
// shape allows, side by side.
#ifndef GPIPE_RUNTIME_ESTIMATE_PLAN_REPORT_H_
#define GPIPE_RUNTIME_ESTIMATE_PLAN_REPORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "layers/registry.h"
#include "runtime/plan/analyzed_plan.h"
#include "runtime/plan/plan_loader.h"

namespace gpipe {

absl::StatusOr<std::string> FormatPlanReport(const AnalyzedPlan& plan,
                                             const LayerRegistry& registry, bool with_schedule);

// One row per training schedule that fits the plan's stages and micro-batches (interleaved with
// the plan's virtual_stages, or 2 when the plan does not interleave): simulated step time,
// bubble, peak live micro-batches and predicted peak memory of the fullest stage.
absl::StatusOr<std::string> FormatScheduleComparison(const LoadedPlan& loaded,
                                                     const LayerRegistry& registry);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_ESTIMATE_PLAN_REPORT_H_

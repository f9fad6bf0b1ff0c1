// FormatPlanReport: what `gpipe-plan check` and `gpipe-plan show` print about a valid plan —
// the stage table, and (show) the schedule grid with the predicted bubble and an estimate of
// each stage's peak memory under the plan's re-materialization policy.
#ifndef GPIPE_RUNTIME_COORD_PLAN_REPORT_H_
#define GPIPE_RUNTIME_COORD_PLAN_REPORT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/plan/plan_analysis.h"

namespace gpipe {

// Predicted bytes a stage holds at its peak (fp32), by kind.
struct StageMemoryEstimate {
  int64_t parameters = 0;   // values + gradients + optimizer state
  int64_t boundary = 0;     // stage inputs kept across the step
  int64_t activations = 0;  // saved activations inside the stage
  int64_t total() const { return parameters + boundary + activations; }
};

// Per stage. GPipe with M micro-batches of b samples: boundary = M·a; activations = M·A with
// remat NEVER, A with EXCEPT_LAST or ALWAYS (a: one micro-batch's stage input, A: its saved
// activations inside the stage) — the paper's O(N + (L/K)·(N/M)).
std::vector<StageMemoryEstimate> EstimateStageMemory(const AnalyzedPlan& plan);

absl::StatusOr<std::string> FormatPlanReport(const AnalyzedPlan& plan, bool with_schedule);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COORD_PLAN_REPORT_H_

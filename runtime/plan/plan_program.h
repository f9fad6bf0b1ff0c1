// The programs a resolved plan runs: its pipeline's schedule (BuildPipelineProgram,
// BuildEvalPipelineProgram) plus the transfers of the skip connections (plan: skip_add,
// skip_concat) whose two ends fall on different parts of the partition.
#ifndef GPIPE_RUNTIME_PLAN_PLAN_PROGRAM_H_
#define GPIPE_RUNTIME_PLAN_PLAN_PROGRAM_H_

#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/control.pb.h"
#include "proto/plan.pb.h"
#include "runtime/plan/analyzed_plan.h"
#include "runtime/schedule/program.h"

namespace gpipe {

// The skip connections of `model` that cross parts (`parts`: the partition in virtual-stage
// order, as control.proto's StageSpec carries it), by join layer. INVALID_ARGUMENT when a skip
// names no earlier layer or a layer falls in no part.
absl::StatusOr<std::vector<schedule::SkipRoute>> SkipRoutesOf(const pb::Model& model,
                                                              std::span<const pb::StageSpec> parts);

// The training program of a resolved plan, and its forward-only evaluation program, with their
// skip transfers. INVALID_ARGUMENT as the builders'.
absl::StatusOr<schedule::Program> TrainingProgramOf(const AnalyzedPlan& plan);
absl::StatusOr<schedule::Program> EvalProgramOf(const AnalyzedPlan& plan);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_PLAN_PLAN_PROGRAM_H_

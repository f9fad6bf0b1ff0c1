// BuildProgram: the one entry point from a schedule kind to its Program. It checks the shape
// (CheckScheduleShape) and dispatches to the kind's pure builder (one file each); a new schedule
// adds a builder file and a case here, and program.h knows none of them.
#ifndef GPIPE_RUNTIME_SCHEDULE_BUILD_PROGRAM_H_
#define GPIPE_RUNTIME_SCHEDULE_BUILD_PROGRAM_H_

#include "absl/status/statusor.h"
#include "proto/plan.pb.h"
#include "runtime/schedule/program.h"

namespace gpipe::schedule {

// The program of schedule `kind` for `stages` stages, `micro_batches` micro-batches and
// `virtual_stages` chunks per stage. INVALID_ARGUMENT naming the plan fields to change when the
// combination is not supported (CheckScheduleShape in schedule_shape.h has the rules).
absl::StatusOr<Program> BuildProgram(pb::Schedule kind, int stages, int micro_batches,
                                     int virtual_stages = 1);

// The training program a resolved plan's pipeline runs: BuildProgram of its schedule and shape,
// or, for CUSTOM, CompileCustomProgram of pipeline.custom (the plan analysis has inlined a
// schedule_csv there and set virtual_stages to the chunks per rank). INVALID_ARGUMENT as theirs.
absl::StatusOr<Program> BuildPipelineProgram(const pb::Pipeline& pipeline);

// The evaluation program (EVAL) over the parts and placement a resolved plan's training program
// runs. INVALID_ARGUMENT as CheckScheduleShape's.
absl::StatusOr<Program> BuildEvalPipelineProgram(const pb::Pipeline& pipeline);

}  // namespace gpipe::schedule

#endif  // GPIPE_RUNTIME_SCHEDULE_BUILD_PROGRAM_H_

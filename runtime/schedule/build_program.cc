#include "runtime/schedule/build_program.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/schedule/custom_program.h"
#include "runtime/schedule/dualpipe_v_builder.h"
#include "runtime/schedule/eval_builder.h"
#include "runtime/schedule/gpipe_builder.h"
#include "runtime/schedule/interleaved_builder.h"
#include "runtime/schedule/one_f_one_b_builder.h"
#include "runtime/schedule/schedule_shape.h"
#include "runtime/schedule/zero_bubble_builder.h"
#include "runtime/schedule/zero_bubble_v_builder.h"

namespace gpipe::schedule {

absl::StatusOr<Program> BuildProgram(pb::Schedule kind, int stages, int micro_batches,
                                     int virtual_stages) {
  RETURN_IF_ERROR(CheckScheduleShape(kind, stages, micro_batches, virtual_stages));
  // A new schedule adds a case here and a builder file of its own; -Wswitch flags a proto enum
  // value without a case (CheckScheduleShape has already rejected values outside the enum).
  switch (kind) {
    case pb::GPIPE:
      return BuildGpipeProgram(stages, micro_batches);
    case pb::ONE_F_ONE_B:
      return BuildOneFOneBProgram(stages, micro_batches);
    case pb::INTERLEAVED_1F1B:
      return BuildInterleavedProgram(stages, micro_batches, virtual_stages);
    case pb::ZERO_BUBBLE_H1:
      return BuildZeroBubbleProgram(ZeroBubbleVariant::kH1, stages, micro_batches);
    case pb::ZERO_BUBBLE_H2:
      return BuildZeroBubbleProgram(ZeroBubbleVariant::kH2, stages, micro_batches);
    case pb::ZERO_BUBBLE_V:
      return BuildZeroBubbleVProgram(stages, micro_batches);
    case pb::DUALPIPE_V:
      return BuildDualPipeVProgram(stages, micro_batches);
    case pb::EVAL:
      return BuildEvalProgram(stages, micro_batches, virtual_stages);
    case pb::CUSTOM:
      return absl::InvalidArgumentError(
          "a CUSTOM schedule is built from its action lists (BuildPipelineProgram), not from "
          "its shape");
  }
  return absl::InvalidArgumentError(
      absl::StrCat("pipeline.schedule ", static_cast<int>(kind),
                   " is not supported; supported schedules: ", ScheduleNames()));
}

absl::StatusOr<Program> BuildPipelineProgram(const pb::Pipeline& pipeline) {
  if (pipeline.schedule() != pb::CUSTOM) {
    return BuildProgram(pipeline.schedule(), pipeline.stages(), pipeline.micro_batches(),
                        pipeline.virtual_stages());
  }
  ASSIGN_OR_RETURN(const ActionTable table, ActionTableFromProto(pipeline.custom()));
  ASSIGN_OR_RETURN(Program program, CompileCustomProgram(table, pipeline.micro_batches()));
  if (program.stages != pipeline.stages() || program.chunks != pipeline.virtual_stages() ||
      program.placement != pipeline.placement()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the CUSTOM schedule's actions run ", program.stages, " ranks x ", program.chunks,
        " chunks placed ", pb::Placement_Name(program.placement), " but the pipeline says stages ",
        pipeline.stages(), ", virtual_stages ", pipeline.virtual_stages(), ", placement ",
        pb::Placement_Name(pipeline.placement())));
  }
  return program;
}

absl::StatusOr<Program> BuildEvalPipelineProgram(const pb::Pipeline& pipeline) {
  RETURN_IF_ERROR(CheckScheduleShape(pb::EVAL, pipeline.stages(), pipeline.micro_batches(),
                                     pipeline.virtual_stages()));
  return BuildEvalProgram(pipeline.stages(), pipeline.micro_batches(), pipeline.virtual_stages(),
                          pipeline.placement());
}

}  // namespace gpipe::schedule

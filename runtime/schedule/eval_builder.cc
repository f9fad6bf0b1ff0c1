#include "runtime/schedule/eval_builder.h"

#include "runtime/core/check.h"
#include "runtime/schedule/instruction_blocks.h"

namespace gpipe::schedule {

StageProgram BuildEvalStageProgram(int stage, int stages, int micro_batches, int chunks,
                                   pb::Placement placement) {
  GPIPE_CHECK(stages >= 1 && micro_batches >= 1 && chunks >= 1 && stage >= 0 && stage < stages)
      << "stage " << stage << " of " << stages << ", " << micro_batches << " micro-batches, "
      << chunks << " chunks";
  const Topology topology{stages, chunks, placement};
  StageProgram program;
  program.stage = stage;
  program.instructions.reserve(3 * static_cast<size_t>(micro_batches) * chunks + 1);
  for (int c = 0; c < chunks; ++c) {
    for (int m = 0; m < micro_batches; ++m) {
      AppendForward(topology, {stage, c}, m, program.instructions);
    }
  }
  AppendStepEnd(/*forward_only=*/true, program.instructions);
  return program;
}

Program BuildEvalProgram(int stages, int micro_batches, int chunks, pb::Placement placement) {
  Program program = EmptyProgram(pb::EVAL, stages, micro_batches, chunks, placement);
  for (int s = 0; s < stages; ++s) {
    program.stage_programs[s] = BuildEvalStageProgram(s, stages, micro_batches, chunks, placement);
  }
  return program;
}

}  // namespace gpipe::schedule

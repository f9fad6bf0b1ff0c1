#include "runtime/schedule/one_f_one_b_builder.h"

#include <algorithm>

#include "runtime/core/check.h"
#include "runtime/schedule/instruction_blocks.h"

namespace gpipe::schedule {

StageProgram BuildOneFOneBStageProgram(int stage, int stages, int micro_batches) {
  GPIPE_CHECK(stages >= 1 && micro_batches >= 1 && stage >= 0 && stage < stages)
      << "stage " << stage << " of " << stages << ", " << micro_batches << " micro-batches";
  const Topology topology{stages, 1};
  const StageChunk at{stage, 0};
  const int warm_up = std::min(stages - stage - 1, micro_batches);

  StageProgram program;
  program.stage = stage;
  std::vector<Instruction>& out = program.instructions;
  out.reserve(6 * static_cast<size_t>(micro_batches) + 2);
  for (int m = 0; m < warm_up; ++m) AppendForward(topology, at, m, out);
  for (int i = 0; i < micro_batches - warm_up; ++i) {
    AppendForward(topology, at, warm_up + i, out);
    AppendBackward(topology, at, i, BackwardPart::kWhole, out);
  }
  for (int m = micro_batches - warm_up; m < micro_batches; ++m) {
    AppendBackward(topology, at, m, BackwardPart::kWhole, out);
  }
  AppendStepEnd(/*forward_only=*/false, out);
  return program;
}

Program BuildOneFOneBProgram(int stages, int micro_batches) {
  Program program = EmptyProgram(pb::ONE_F_ONE_B, stages, micro_batches, 1);
  for (int s = 0; s < stages; ++s) {
    program.stage_programs[s] = BuildOneFOneBStageProgram(s, stages, micro_batches);
  }
  return program;
}

}  // namespace gpipe::schedule

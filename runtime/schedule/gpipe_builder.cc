#include "runtime/schedule/gpipe_builder.h"

#include "runtime/core/check.h"
#include "runtime/schedule/instruction_blocks.h"

namespace gpipe::schedule {

StageProgram BuildGpipeStageProgram(int stage, int stages, int micro_batches) {
  GPIPE_CHECK(stages >= 1 && micro_batches >= 1 && stage >= 0 && stage < stages)
      << "stage " << stage << " of " << stages << ", " << micro_batches << " micro-batches";
  const Topology topology{stages, 1};
  const StageChunk at{stage, 0};

  StageProgram program;
  program.stage = stage;
  std::vector<Instruction>& out = program.instructions;
  // At most six instructions per micro-batch (an inner stage), plus the two step-level ones.
  out.reserve(6 * static_cast<size_t>(micro_batches) + 2);
  for (int m = 0; m < micro_batches; ++m) AppendForward(topology, at, m, out);
  for (int m = micro_batches - 1; m >= 0; --m) {
    AppendBackward(topology, at, m, BackwardPart::kWhole, out);
  }
  AppendStepEnd(/*forward_only=*/false, out);
  return program;
}

Program BuildGpipeProgram(int stages, int micro_batches) {
  Program program = EmptyProgram(pb::GPIPE, stages, micro_batches, 1);
  for (int s = 0; s < stages; ++s) {
    program.stage_programs[s] = BuildGpipeStageProgram(s, stages, micro_batches);
  }
  return program;
}

}  // namespace gpipe::schedule

#include "runtime/schedule/gpipe_builder.h"

#include "runtime/core/check.h"

namespace gpipe::schedule {

StageProgram BuildGpipeStageProgram(int stage, int stages, int micro_batches) {
  GPIPE_CHECK(stages >= 1 && micro_batches >= 1 && stage >= 0 && stage < stages)
      << "stage " << stage << " of " << stages << ", " << micro_batches << " micro-batches";
  const bool first = stage == 0;
  const bool last = stage == stages - 1;

  StageProgram program;
  program.stage = stage;
  std::vector<Instruction>& out = program.instructions;
  // At most six instructions per micro-batch (an inner stage), plus the two step-level ones.
  out.reserve(6 * static_cast<size_t>(micro_batches) + 2);

  for (int m = 0; m < micro_batches; ++m) {
    if (first) out.push_back(LoadMicroBatch{m});
    if (!first) out.push_back(RecvActivation{m});
    if (last && !first) out.push_back(LoadMicroBatch{m});
    out.push_back(Forward{m});
    if (!last) out.push_back(SendActivation{m});
  }
  for (int m = micro_batches - 1; m >= 0; --m) {
    if (!last) out.push_back(RecvGrad{m});
    out.push_back(Backward{m});
    if (!first) out.push_back(SendGrad{m});
  }
  out.push_back(AllReduceGrads{});
  out.push_back(OptimizerStep{});
  return program;
}

Program BuildGpipeProgram(int stages, int micro_batches) {
  Program program;
  program.kind = pb::GPIPE;
  program.stages = stages;
  program.micro_batches = micro_batches;
  program.chunks = 1;
  program.stage_programs.reserve(stages);
  for (int s = 0; s < stages; ++s) {
    program.stage_programs.push_back(BuildGpipeStageProgram(s, stages, micro_batches));
  }
  return program;
}

}  // namespace gpipe::schedule

#include "runtime/schedule/interleaved_builder.h"

#include <algorithm>

#include "runtime/core/check.h"
#include "runtime/schedule/instruction_blocks.h"

namespace gpipe::schedule {
namespace {

// Where forward or backward number k of a stage works.
struct Work {
  int chunk;
  int micro_batch;
};

Work ForwardWork(int k, int stages, int chunks) {
  return {(k / stages) % chunks, (k / (stages * chunks)) * stages + k % stages};
}

Work BackwardWork(int k, int stages, int chunks) {
  const Work forward = ForwardWork(k, stages, chunks);
  return {chunks - 1 - forward.chunk, forward.micro_batch};
}

}  // namespace

StageProgram BuildInterleavedStageProgram(int stage, int stages, int micro_batches, int chunks) {
  GPIPE_CHECK(stages >= 2 && chunks >= 2 && micro_batches >= 1 && micro_batches % stages == 0 &&
              stage >= 0 && stage < stages)
      << "stage " << stage << " of " << stages << ", " << micro_batches << " micro-batches, "
      << chunks << " chunks";
  const Topology topology{stages, chunks};
  const int total = chunks * micro_batches;
  const int warm_up = std::min(2 * (stages - stage - 1) + (chunks - 1) * stages, total);
  auto forward = [&](int k, std::vector<Instruction>& out) {
    const Work work = ForwardWork(k, stages, chunks);
    AppendForward(topology, {stage, work.chunk}, work.micro_batch, out);
  };
  auto backward = [&](int k, std::vector<Instruction>& out) {
    const Work work = BackwardWork(k, stages, chunks);
    AppendBackward(topology, {stage, work.chunk}, work.micro_batch, BackwardPart::kWhole, out);
  };

  StageProgram program;
  program.stage = stage;
  std::vector<Instruction>& out = program.instructions;
  out.reserve(6 * static_cast<size_t>(total) + 2);
  for (int k = 0; k < warm_up; ++k) forward(k, out);
  for (int i = 0; i < total - warm_up; ++i) {
    forward(warm_up + i, out);
    backward(i, out);
  }
  for (int k = total - warm_up; k < total; ++k) backward(k, out);
  AppendStepEnd(/*forward_only=*/false, out);
  return program;
}

Program BuildInterleavedProgram(int stages, int micro_batches, int chunks) {
  Program program = EmptyProgram(pb::INTERLEAVED_1F1B, stages, micro_batches, chunks);
  for (int s = 0; s < stages; ++s) {
    program.stage_programs[s] = BuildInterleavedStageProgram(s, stages, micro_batches, chunks);
  }
  return program;
}

}  // namespace gpipe::schedule

#include "runtime/schedule/interleaved_builder.h"

#include <algorithm>
#include <vector>

#include "runtime/core/check.h"
#include "runtime/schedule/instruction_blocks.h"
#include "runtime/schedule/receive_order.h"

namespace gpipe::schedule {
namespace {

// Where forward or backward number k of a stage works.
struct Work {
  int chunk;
  int micro_batch;
};

// The forwards' (chunk, micro-batch) sequence for a multiple of K micro-batches: groups of K,
// each group through every chunk before the next starts.
std::vector<Work> ForwardOrder(int stages, int padded_micro_batches, int chunks) {
  std::vector<Work> order;
  order.reserve(static_cast<size_t>(chunks) * padded_micro_batches);
  for (int first = 0; first < padded_micro_batches; first += stages) {
    for (int c = 0; c < chunks; ++c) {
      for (int j = 0; j < stages; ++j) order.push_back({c, first + j});
    }
  }
  return order;
}

// Stage `stage`'s order for M rounded up to a multiple of K, then without the micro-batches
// >= M. Dropping a micro-batch's work on every stage cannot deadlock a program that ran with it:
// what remains waits only on what remains (a receive waits for its own micro-batch's send), in
// the same order. So a partial last group runs the full group's order with holes.
StageProgram StageOrder(int stage, int stages, int micro_batches, int chunks) {
  GPIPE_CHECK(stages >= 2 && chunks >= 2 && micro_batches >= 1 && stage >= 0 && stage < stages)
      << "stage " << stage << " of " << stages << ", " << micro_batches << " micro-batches, "
      << chunks << " chunks";
  const Topology topology{stages, chunks};
  const int padded = (micro_batches + stages - 1) / stages * stages;
  const int total = chunks * padded;
  const int warm_up = std::min(2 * (stages - stage - 1) + (chunks - 1) * stages, total);
  const std::vector<Work> order = ForwardOrder(stages, padded, chunks);
  StageProgram program;
  program.stage = stage;
  std::vector<Instruction>& out = program.instructions;
  out.reserve(6 * static_cast<size_t>(chunks) * micro_batches + 2);
  auto forward = [&](int k) {
    const Work work = order[k];
    if (work.micro_batch >= micro_batches) return;
    AppendForward(topology, {stage, work.chunk}, work.micro_batch, out);
  };
  // Backward k works on forward k's micro-batch with the chunks reversed.
  auto backward = [&](int k) {
    const Work work = order[k];
    if (work.micro_batch >= micro_batches) return;
    AppendBackward(topology, {stage, chunks - 1 - work.chunk}, work.micro_batch,
                   BackwardPart::kWhole, out);
  };
  for (int k = 0; k < warm_up; ++k) forward(k);
  for (int i = 0; i < total - warm_up; ++i) {
    forward(warm_up + i);
    backward(i);
  }
  for (int k = total - warm_up; k < total; ++k) backward(k);
  AppendStepEnd(/*forward_only=*/false, out);
  return program;
}

}  // namespace

Program BuildInterleavedProgram(int stages, int micro_batches, int chunks) {
  Program program = EmptyProgram(pb::INTERLEAVED_1F1B, stages, micro_batches, chunks);
  for (int s = 0; s < stages; ++s) {
    program.stage_programs[s] = StageOrder(s, stages, micro_batches, chunks);
  }
  MatchReceivesToSends(program);
  return program;
}

}  // namespace gpipe::schedule

#include "runtime/schedule/instruction_blocks.h"

namespace gpipe::schedule {

void AppendForward(const Topology& topology, StageChunk at, int micro_batch,
                   std::vector<Instruction>& out) {
  const bool first = topology.IsFirst(at);
  const bool last = topology.IsLast(at);
  const int m = micro_batch;
  const int c = at.chunk;
  if (first) out.push_back(LoadMicroBatch{m, c});
  if (!first) out.push_back(RecvActivation{m, c});
  if (last && !first) out.push_back(LoadMicroBatch{m, c});
  out.push_back(Forward{m, c});
  if (!last) out.push_back(SendActivation{m, c});
}

void AppendBackward(const Topology& topology, StageChunk at, int micro_batch, BackwardPart part,
                    std::vector<Instruction>& out) {
  const int m = micro_batch;
  const int c = at.chunk;
  if (!topology.IsLast(at)) out.push_back(RecvGrad{m, c});
  if (part == BackwardPart::kWhole) {
    out.push_back(Backward{m, c});
  } else {
    out.push_back(BackwardInput{m, c});
  }
  if (!topology.IsFirst(at)) out.push_back(SendGrad{m, c});
}

void AppendStepEnd(bool forward_only, std::vector<Instruction>& out) {
  if (forward_only) {
    out.push_back(ReportEval{});
    return;
  }
  out.push_back(AllReduceGrads{});
  out.push_back(OptimizerStep{});
}

void AppendChunkOp(const Topology& topology, int stage, const ChunkOp& op,
                   std::vector<Instruction>& out) {
  const StageChunk at{stage, op.chunk};
  switch (op.pass) {
    case ChunkPass::kForward:
      AppendForward(topology, at, op.micro_batch, out);
      return;
    case ChunkPass::kBackward:
      AppendBackward(topology, at, op.micro_batch, BackwardPart::kWhole, out);
      return;
    case ChunkPass::kBackwardInput:
      AppendBackward(topology, at, op.micro_batch, BackwardPart::kInputGradient, out);
      return;
    case ChunkPass::kBackwardWeight:
      out.push_back(BackwardWeight{op.micro_batch, op.chunk});
      return;
  }
}

Program EmptyProgram(pb::Schedule kind, int stages, int micro_batches, int chunks,
                     pb::Placement placement) {
  Program program;
  program.placement = placement;
  program.kind = kind;
  program.stages = stages;
  program.micro_batches = micro_batches;
  program.chunks = chunks;
  program.stage_programs.resize(stages);
  for (int s = 0; s < stages; ++s) program.stage_programs[s].stage = s;
  return program;
}

}  // namespace gpipe::schedule

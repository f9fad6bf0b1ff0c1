// The blocks every builder assembles a stage's list from, so that all schedules place loads
// and transfers the same way: a receive right before the instruction that needs it, a send
// right after the instruction that produced it. What differs between schedules is only the
// order of the blocks. Pure helpers; callers pass valid positions.
#ifndef GPIPE_RUNTIME_SCHEDULE_INSTRUCTION_BLOCKS_H_
#define GPIPE_RUNTIME_SCHEDULE_INSTRUCTION_BLOCKS_H_

#include <vector>

#include "proto/plan.pb.h"
#include "runtime/schedule/instruction.h"
#include "runtime/schedule/program.h"
#include "runtime/schedule/topology.h"

namespace gpipe::schedule {

// Forward of `micro_batch` on virtual stage `at`:
//   [LoadMicroBatch if first] [RecvActivation if not first]
//   [LoadMicroBatch if last and not first: the targets] Forward [SendActivation if not last]
// A single virtual stage (first and last) loads once: inputs and targets together.
void AppendForward(const Topology& topology, StageChunk at, int micro_batch,
                   std::vector<Instruction>& out);

// How a backward block computes: whole (Backward) or its zero-bubble input-gradient part
// (BackwardInput; the caller appends BackwardWeight later).
enum class BackwardPart { kWhole, kInputGradient };

// Backward of `micro_batch` on virtual stage `at`:
//   [RecvGrad if not last] Backward or BackwardInput [SendGrad if not first]
void AppendBackward(const Topology& topology, StageChunk at, int micro_batch, BackwardPart part,
                    std::vector<Instruction>& out);

// One compute step of a chunked order: the forward, whole backward, input-gradient part or
// weight-gradient part of `micro_batch` on chunk `chunk` of a stage.
enum class ChunkPass { kForward, kBackward, kBackwardInput, kBackwardWeight };
struct ChunkOp {
  ChunkPass pass = ChunkPass::kForward;
  int chunk = 0;
  int micro_batch = 0;
  bool operator==(const ChunkOp&) const = default;
};

// Appends `op`'s block on stage `stage`: AppendForward, AppendBackward (whole or input
// gradient), or a lone BackwardWeight.
void AppendChunkOp(const Topology& topology, int stage, const ChunkOp& op,
                   std::vector<Instruction>& out);

// The step's end: AllReduceGrads, OptimizerStep when training; ReportEval when forward-only.
void AppendStepEnd(bool forward_only, std::vector<Instruction>& out);

// A Program of `kind` with its shape set and one empty StageProgram per stage (stage numbers
// filled in), for a builder to fill.
Program EmptyProgram(pb::Schedule kind, int stages, int micro_batches, int chunks,
                     pb::Placement placement = pb::LOOPED);

}  // namespace gpipe::schedule

#endif  // GPIPE_RUNTIME_SCHEDULE_INSTRUCTION_BLOCKS_H_

// Pipeline topology shared by builders and the verifier: K stages (processes), each running
// `chunks` virtual chunks, placed LOOPED or V_SHAPE (plan.proto's Placement). LOOPED: chunk c of
// stage s is virtual stage c*K + s (Megatron-LM's interleaved mapping), so activations flow
// s -> s+1 and wrap from stage K-1 to stage 0 of the next chunk. V_SHAPE: the chunks zigzag, chunk
// c of stage s being virtual stage c*K + s for even c and c*K + K-1-s for odd c, so activations
// flow down the stages on even chunks, up on odd ones, and each turn stays on one stage (a local
// hand-off). With one chunk both are the plain pipeline 0 -> 1 -> ... -> K-1. A value type.
#ifndef GPIPE_RUNTIME_SCHEDULE_TOPOLOGY_H_
#define GPIPE_RUNTIME_SCHEDULE_TOPOLOGY_H_

#include "proto/plan.pb.h"

namespace gpipe::schedule {

// One (stage, chunk) pair: where a virtual stage runs.
struct StageChunk {
  int stage = 0;
  int chunk = 0;
  bool operator==(const StageChunk&) const = default;
};

struct Topology {
  int stages = 1;
  int chunks = 1;
  pb::Placement placement = pb::LOOPED;

  int virtual_stages() const { return stages * chunks; }
  int VirtualStage(StageChunk at) const {
    return at.chunk * stages + (Reversed(at.chunk) ? stages - 1 - at.stage : at.stage);
  }
  StageChunk At(int virtual_stage) const {
    const int chunk = virtual_stage / stages;
    const int offset = virtual_stage % stages;
    return {Reversed(chunk) ? stages - 1 - offset : offset, chunk};
  }
  // The first virtual stage loads inputs; the last loads targets and computes the loss.
  bool IsFirst(StageChunk at) const { return VirtualStage(at) == 0; }
  bool IsLast(StageChunk at) const { return VirtualStage(at) == virtual_stages() - 1; }
  // Where activations go (precondition: !IsLast) and where they come from (!IsFirst).
  StageChunk Next(StageChunk at) const { return At(VirtualStage(at) + 1); }
  StageChunk Previous(StageChunk at) const { return At(VirtualStage(at) - 1); }
  // Whether `chunk` runs the stages backwards (V_SHAPE's odd chunks).
  bool Reversed(int chunk) const { return placement == pb::V_SHAPE && chunk % 2 == 1; }
};

// A resolved plan's pipeline (stages, virtual_stages and placement; at least one of each).
inline Topology TopologyOf(const pb::Pipeline& pipeline) {
  return {pipeline.stages() < 1 ? 1 : pipeline.stages(),
          pipeline.virtual_stages() < 1 ? 1 : pipeline.virtual_stages(), pipeline.placement()};
}

}  // namespace gpipe::schedule

#endif  // GPIPE_RUNTIME_SCHEDULE_TOPOLOGY_H_

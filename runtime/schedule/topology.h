// Pipeline topology shared by builders and the verifier: K stages (processes), each running
// `chunks` virtual chunks. Chunk c of stage s is virtual stage c*K + s (Megatron-LM's interleaved
// mapping), so activations flow s -> s+1 and wrap from stage K-1 to stage 0 of the next chunk.
// With one chunk this is the plain pipeline 0 -> 1 -> ... -> K-1. A value type; no state.
#ifndef GPIPE_RUNTIME_SCHEDULE_TOPOLOGY_H_
#define GPIPE_RUNTIME_SCHEDULE_TOPOLOGY_H_

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

  int virtual_stages() const { return stages * chunks; }
  int VirtualStage(StageChunk at) const { return at.chunk * stages + at.stage; }
  StageChunk At(int virtual_stage) const {
    return {virtual_stage % stages, virtual_stage / stages};
  }
  // The first virtual stage loads inputs; the last loads targets and computes the loss.
  bool IsFirst(StageChunk at) const { return VirtualStage(at) == 0; }
  bool IsLast(StageChunk at) const { return VirtualStage(at) == virtual_stages() - 1; }
  // Where activations go (precondition: !IsLast) and where they come from (!IsFirst).
  StageChunk Next(StageChunk at) const { return At(VirtualStage(at) + 1); }
  StageChunk Previous(StageChunk at) const { return At(VirtualStage(at) - 1); }
};

}  // namespace gpipe::schedule

#endif  // GPIPE_RUNTIME_SCHEDULE_TOPOLOGY_H_

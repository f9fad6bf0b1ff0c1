// Interleaved 1F1B (Narayanan et al., "Efficient Large-Scale Language Model Training on GPU
// Clusters Using Megatron-LM", SC 2021; Megatron-LM's
// forward_backward_pipelining_with_interleaving). Each of the K stages runs v chunks; chunk c of
// stage s is virtual stage c*K + s (topology.h). Every stage runs v*M forwards and v*M backwards,
// numbered k = 0..v*M-1, in groups of K micro-batches that go through all chunks before the
// next group starts:
//   forward k:   chunk (k / K) % v,          micro-batch (k / (K*v)) * K + k % K
//   backward k:  chunk v - 1 - (k / K) % v,  the same micro-batch formula
// Stage s runs w = min(2*(K - s - 1) + (v - 1)*K, v*M) warm-up forwards, then alternates
// forward w+i and backward i, then runs the remaining backwards. The bubble shrinks about v
// times, (K-1)/(v*M+K-1) with equal chunks, at the cost of v times the transfers. Needs
// K >= 2, v >= 2 and M % K == 0 (CheckScheduleShape). Every stage walks the same
// (chunk, micro-batch) sequence, so each link's sends and receives come in the same order; per
// chunk, backwards run in micro-batch order 0..M-1. Blocks (loads, transfers) as in
// instruction_blocks.h: only virtual stage 0 loads inputs and only the last one loads targets.
#ifndef GPIPE_RUNTIME_SCHEDULE_INTERLEAVED_BUILDER_H_
#define GPIPE_RUNTIME_SCHEDULE_INTERLEAVED_BUILDER_H_

#include "runtime/schedule/instruction.h"
#include "runtime/schedule/program.h"

namespace gpipe::schedule {

StageProgram BuildInterleavedStageProgram(int stage, int stages, int micro_batches, int chunks);

// All stages' programs, kind INTERLEAVED_1F1B, `chunks` chunks per stage.
Program BuildInterleavedProgram(int stages, int micro_batches, int chunks);

}  // namespace gpipe::schedule

#endif  // GPIPE_RUNTIME_SCHEDULE_INTERLEAVED_BUILDER_H_

// Interleaved 1F1B (Narayanan et al., "Efficient Large-Scale Language Model Training on GPU
// Clusters Using Megatron-LM", SC 2021; Megatron-LM's
// forward_backward_pipelining_with_interleaving). Each of the K stages runs v chunks; chunk c of
// stage s is virtual stage c*K + s (topology.h). Every stage runs v*M forwards and v*M backwards,
// numbered k = 0..v*M-1, in groups of K micro-batches that go through all chunks before the
// next group starts; when M is not a multiple of K, the order is that of M rounded up to one,
// without the micro-batches >= M (what remains waits only on what remains, so it cannot deadlock):
//   forward k:   chunk (k / K) % v,          micro-batch (k / (K*v)) * K + k % K  (full groups)
//   backward k:  chunk v - 1 - (k / K) % v,  the same micro-batch
// Stage s runs w = min(2*(K - s - 1) + (v - 1)*K, v*M) warm-up forwards, then alternates
// forward w+i and backward i, then runs the remaining backwards. The bubble shrinks about v
// times, (K-1)/(v*M+K-1) with equal chunks, at the cost of v times the transfers. Needs
// K >= 2 and v >= 2 (CheckScheduleShape); any M >= 1, verified for K <= 64, M <= 256. Every stage
// walks the same (chunk, micro-batch) sequence, so each link's sends and receives come in the same
// order; per chunk, backwards run in micro-batch order 0..M-1. At K = 2 one direction carries both
// kinds, and with a partial last group their orders can differ: receives then move earlier to the
// sender's order (receive_order.h). Blocks (loads, transfers) as in
// instruction_blocks.h: only virtual stage 0 loads inputs and only the last one loads targets.
#ifndef GPIPE_RUNTIME_SCHEDULE_INTERLEAVED_BUILDER_H_
#define GPIPE_RUNTIME_SCHEDULE_INTERLEAVED_BUILDER_H_

#include "runtime/schedule/instruction.h"
#include "runtime/schedule/program.h"

namespace gpipe::schedule {

// All stages' programs, kind INTERLEAVED_1F1B, `chunks` chunks per stage.
Program BuildInterleavedProgram(int stages, int micro_batches, int chunks);

}  // namespace gpipe::schedule

#endif  // GPIPE_RUNTIME_SCHEDULE_INTERLEAVED_BUILDER_H_

// ZERO_BUBBLE_V (Qi et al., "Pipeline Parallelism with Controllable Memory", 2024): K ranks, two
// chunks each in a V (placement V_SHAPE, topology.h): rank r runs virtual stages r (chunk 0) and
// 2K-1-r (chunk 1), so rank 0 holds the first and the last and the turn at rank K-1 is a local
// hand-off. Every backward is split into its input-gradient part I and its weight-gradient part
// W, as in ZERO_BUBBLE_H1.
//
// The order comes from a deterministic list scheduler that simulates all ranks with unit costs
// (every chunk's F, I and W take 1) and free transfers and, whenever a rank is free, starts the
// first of
//   1. I of the oldest micro-batch whose output gradient is there (the last virtual stage: whose
//      forward is done); chunk 1 first on a tie;
//   2. F of the next micro-batch on chunk 1, then on chunk 0, when its input is there and the
//      rank holds fewer than 2K chunk micro-batches (forwarded, W not yet run);
//   3. W of the oldest micro-batch whose I has run (chunk 1 first on a tie);
// and otherwise idles. A chunk micro-batch holds half a stage's activations when the chunks are
// equal, so the cap is K stages' worth: 1F1B's peak, that of its first stage, on every rank. F, I
// and W run in micro-batch order on each chunk, so gradients accumulate in 1F1B's order.
//
// With each chunk's F, I and W costing half a stage's (equal chunks) and free transfers, the
// simulated step takes 3M + (K-1)/2 stage units at M >= K (K = 4, 8; M = 8, 16, 32 in
// v_shape_builders_test, which prints the table): ZB-H1 takes 3M + K - 1, 1F1B 3M + 3(K-1), so
// the V halves ZB-H1's ramp because the first and the last virtual stage share rank 0.
// Pure function of (K, M); any K, M >= 1.
#ifndef GPIPE_RUNTIME_SCHEDULE_ZERO_BUBBLE_V_BUILDER_H_
#define GPIPE_RUNTIME_SCHEDULE_ZERO_BUBBLE_V_BUILDER_H_

#include <vector>

#include "runtime/schedule/instruction_blocks.h"
#include "runtime/schedule/program.h"

namespace gpipe::schedule {

// Most chunk micro-batches a rank holds under ZERO_BUBBLE_V: 2K (the list scheduler's cap), and
// never more than the 2M there are.
int ZeroBubbleVLiveCap(int stages, int micro_batches);

// Each rank's order (index = rank). Precondition: K, M >= 1.
std::vector<std::vector<ChunkOp>> ZeroBubbleVOrder(int stages, int micro_batches);

// The program of `kind` (ZERO_BUBBLE_V, or DUALPIPE_V) running `orders` on a V: two chunks per
// rank, placement V_SHAPE, receives ordered as NCCL's matching needs (receive_order.h).
Program VShapeProgram(pb::Schedule kind, int micro_batches,
                      const std::vector<std::vector<ChunkOp>>& orders);

// ZeroBubbleVOrder's program, kind ZERO_BUBBLE_V.
Program BuildZeroBubbleVProgram(int stages, int micro_batches);

}  // namespace gpipe::schedule

#endif  // GPIPE_RUNTIME_SCHEDULE_ZERO_BUBBLE_V_BUILDER_H_

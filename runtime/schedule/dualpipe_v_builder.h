// DUALPIPE_V: DeepSeek's DualPipeV order (the "cut-in-half" DualPipe of DeepSeek-V3, 2025) on the
// V placement ZERO_BUBBLE_V uses (two chunks per rank, rank r holding virtual stages r and
// 2K-1-r; zero_bubble_v_builder.h). Rank r of K with M >= 2K micro-batches runs eight phases:
//   1. 2(K-r-1) x F0                       5. K-r-1 x (B1, F1, B0)
//   2. r+1 x (F0, F1)                      6. r+1 x (B1, B0), the second half split (I, W later)
//   3. K-r-1 x (I1, W1, F1)                7. K-r-1 x (W, I0)
//   4. M-2K+r+1 x (F0, B1, F1, B0)         8. r+1 x W
// where F0/F1, B0/B1 are forward and whole backward of the next micro-batch on chunk 0/1, I is a
// backward's input-gradient part whose W (its weight-gradient part) is queued, and a lone W runs
// the oldest queued one. Phase 6 splits from its middle iteration on (before B1 on odd ranks,
// before B0 on even ones). DualPipeV overlaps each (F, B) pair of phases 4 and 5 on two streams
// to hide its expert-parallel all-to-all; here the pair runs forward then backward on one stream,
// as PyTorch's OVERLAP_F_B actions do. F and B run in micro-batch order on each chunk.
// With M < 2K the phases do not fit (phase 4 would run a negative count): the program is then
// ZERO_BUBBLE_V's order under the kind DUALPIPE_V, and DualPipeVDegenerates says so.
// Pure function of (K, M); any K, M >= 1.
#ifndef GPIPE_RUNTIME_SCHEDULE_DUALPIPE_V_BUILDER_H_
#define GPIPE_RUNTIME_SCHEDULE_DUALPIPE_V_BUILDER_H_

#include <vector>

#include "runtime/schedule/instruction_blocks.h"
#include "runtime/schedule/program.h"

namespace gpipe::schedule {

// Whether K stages and M micro-batches are too few for the phases (M < 2K).
bool DualPipeVDegenerates(int stages, int micro_batches);

// Each rank's order (index = rank). Precondition: K, M >= 1.
std::vector<std::vector<ChunkOp>> DualPipeVOrder(int stages, int micro_batches);

// DualPipeVOrder's program, kind DUALPIPE_V, placement V_SHAPE.
Program BuildDualPipeVProgram(int stages, int micro_batches);

}  // namespace gpipe::schedule

#endif  // GPIPE_RUNTIME_SCHEDULE_DUALPIPE_V_BUILDER_H_

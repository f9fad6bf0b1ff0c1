// One-forward-one-backward (PipeDream-flush; Narayanan et al., "Memory-Efficient
// Pipeline-Parallel DNN Training", 2021; the non-interleaved schedule of Megatron-LM's
// forward_backward_pipelining_without_interleaving). Stage s of K:
//   warm-up:     w = min(K - s - 1, M) forwards, micro-batches 0..w-1
//   steady:      for i = 0..M-w-1: Forward(w + i), Backward(i)
//   cool-down:   Backward(M - w .. M - 1)
//   AllReduceGrads, OptimizerStep
// A stage holds at most min(K - s, M) micro-batches of activations (GPipe holds M) for the same
// bubble, (K-1)/(M+K-1) with equal stages. Backwards run in micro-batch order 0..M-1 on every
// stage, so gradients accumulate in the same order whatever K is. Blocks (loads, transfers)
// as in instruction_blocks.h. Pure functions of (K, M); callers validate K >= 1, M >= 1.
#ifndef GPIPE_RUNTIME_SCHEDULE_ONE_F_ONE_B_BUILDER_H_
#define GPIPE_RUNTIME_SCHEDULE_ONE_F_ONE_B_BUILDER_H_

#include "runtime/schedule/instruction.h"
#include "runtime/schedule/program.h"

namespace gpipe::schedule {

StageProgram BuildOneFOneBStageProgram(int stage, int stages, int micro_batches);

// All stages' programs, kind ONE_F_ONE_B, one chunk.
Program BuildOneFOneBProgram(int stages, int micro_batches);

}  // namespace gpipe::schedule

#endif  // GPIPE_RUNTIME_SCHEDULE_ONE_F_ONE_B_BUILDER_H_

// GPipe fill-drain (Huang et al. 2019; torchgpipe's order): every micro-batch forward in
// order 0..M-1, then every backward in reverse order M-1..0, then AllReduceGrads and
// OptimizerStep. Backward in reverse order makes gradient accumulation order the same for
// every K. Pure functions of (K, M); callers validate K >= 1, M >= 1 (BuildProgram does).
#ifndef GPIPE_RUNTIME_SCHEDULE_GPIPE_BUILDER_H_
#define GPIPE_RUNTIME_SCHEDULE_GPIPE_BUILDER_H_

#include "runtime/schedule/instruction.h"
#include "runtime/schedule/program.h"

namespace gpipe::schedule {

// Stage `stage` of `stages`:
//   for m = 0..M-1:  [LoadMicroBatch(m) if first] [RecvActivation(m) if not first]
//                    [LoadMicroBatch(m) if last and not first: the targets]
//                    Forward(m) [SendActivation(m) if not last]
//   for m = M-1..0:  [RecvGrad(m) if not last] Backward(m) [SendGrad(m) if not first]
//   AllReduceGrads, OptimizerStep
// With one stage, LoadMicroBatch(m) appears once per m (inputs and targets together).
StageProgram BuildGpipeStageProgram(int stage, int stages, int micro_batches);

// All stages' programs, kind GPIPE, one chunk.
Program BuildGpipeProgram(int stages, int micro_batches);

}  // namespace gpipe::schedule

#endif  // GPIPE_RUNTIME_SCHEDULE_GPIPE_BUILDER_H_

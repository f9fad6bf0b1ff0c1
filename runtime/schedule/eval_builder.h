// Forward-only evaluation (EVAL): GPipe's forward half (Huang et al. 2019) and nothing else.
// Stage s of K:
//   for m = 0..M-1:  [LoadMicroBatch(m) if first] [RecvActivation(m) if not first]
//                    [LoadMicroBatch(m) if last and not first: the targets, for the loss]
//                    Forward(m) [SendActivation(m) if not last]
//   ReportEval
// No activations are kept for a backward, so the fill-drain order costs no memory; its bubble
// is (K-1)/(M+K-1) with equal stages. Pure functions of (K, M); callers validate K, M >= 1.
#ifndef GPIPE_RUNTIME_SCHEDULE_EVAL_BUILDER_H_
#define GPIPE_RUNTIME_SCHEDULE_EVAL_BUILDER_H_

#include "runtime/schedule/instruction.h"
#include "runtime/schedule/program.h"

namespace gpipe::schedule {

StageProgram BuildEvalStageProgram(int stage, int stages, int micro_batches);

// All stages' programs, kind EVAL, one chunk.
Program BuildEvalProgram(int stages, int micro_batches);

}  // namespace gpipe::schedule

#endif  // GPIPE_RUNTIME_SCHEDULE_EVAL_BUILDER_H_

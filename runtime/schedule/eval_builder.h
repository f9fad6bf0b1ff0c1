// Forward-only evaluation (EVAL): GPipe's forward half (Huang et al. 2019) and nothing else.
// Stage s of K, with v chunks per stage (the model parts of an INTERLEAVED_1F1B training
// program, placed as its placement says: LOOPED, chunk c of stage s is part c*K+s; V_SHAPE, the
// odd chunks run the stages backwards; v = 1 otherwise):
//   for c = 0..v-1, m = 0..M-1:
//                    [LoadMicroBatch(m) if first part] [RecvActivation(m) if not first part]
//                    [LoadMicroBatch(m) if last part and not first: the targets, for the loss]
//                    Forward(m) [SendActivation(m) if not last part]
//   ReportEval
// No activations are kept for a backward, so the fill-drain order costs no memory; its bubble
// is (K-1)/(M+K-1) with equal stages and one chunk. Chunk by chunk cannot deadlock under either
// placement: a chunk's forwards all run before the next chunk's. Pure functions of (K, M, v,
// placement); callers validate K, M, v >= 1.
#ifndef GPIPE_RUNTIME_SCHEDULE_EVAL_BUILDER_H_
#define GPIPE_RUNTIME_SCHEDULE_EVAL_BUILDER_H_

#include "runtime/schedule/instruction.h"
#include "runtime/schedule/program.h"

namespace gpipe::schedule {

StageProgram BuildEvalStageProgram(int stage, int stages, int micro_batches, int chunks = 1,
                                   pb::Placement placement = pb::LOOPED);

// All stages' programs, kind EVAL.
Program BuildEvalProgram(int stages, int micro_batches, int chunks = 1,
                         pb::Placement placement = pb::LOOPED);

}  // namespace gpipe::schedule

#endif  // GPIPE_RUNTIME_SCHEDULE_EVAL_BUILDER_H_

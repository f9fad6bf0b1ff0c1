// MicroBatchPlan: what a stage's program implies for each (chunk, micro-batch) before it runs.
//
// Re-materialization is decided here, per micro-batch, from the program rather than from the
// schedule's name: under EXCEPT_LAST a micro-batch keeps its activations exactly when its
// backward (Backward or BackwardInput) is the next compute instruction after its Forward on this
// stage, so recomputing it could save nothing. For GPIPE that is the last micro-batch
// (torchgpipe's 'except_last'); for 1F1B it is every micro-batch on the last stage, where each
// forward is followed by its own backward. NEVER keeps all, ALWAYS none. Forward-only (EVAL)
// programs keep nothing. Pure; the executor builds one per program.
#ifndef GPIPE_RUNTIME_EXEC_MICRO_BATCH_PLAN_H_
#define GPIPE_RUNTIME_EXEC_MICRO_BATCH_PLAN_H_

#include <vector>

#include "proto/plan.pb.h"
#include "runtime/schedule/instruction.h"

namespace gpipe {

class MicroBatchPlan {
 public:
  // Instructions naming a chunk or micro-batch outside [0, chunks) x [0, micro_batches) are
  // ignored here (the executor rejects them when it reaches them).
  MicroBatchPlan(const schedule::StageProgram& program, int chunks, int micro_batches,
                 pb::Remat remat);

  // Whether the program only runs forward (it ends with ReportEval, not OptimizerStep).
  bool forward_only() const { return forward_only_; }
  // Whether Forward(chunk, micro_batch) keeps the layers' saved tensors for the backward.
  bool KeepsActivations(int chunk, int micro_batch) const;

 private:
  int micro_batches_;
  bool forward_only_ = false;
  std::vector<bool> keep_;  // index chunk * micro_batches + micro_batch
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_EXEC_MICRO_BATCH_PLAN_H_

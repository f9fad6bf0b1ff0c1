// MicroBatchPlan: what a stage's program implies for each (chunk, micro-batch) before it runs.
//
// Re-materialization is decided here, per micro-batch, from the program rather than from the
// schedule's name: under EXCEPT_LAST a micro-batch keeps its activations exactly when its
// backward (Backward or BackwardInput) is the next compute instruction after its Forward on this
// stage, so recomputing it could save nothing. For GPIPE that is the last micro-batch
// (torchgpipe's 'except_last'); for 1F1B it is every micro-batch on the last stage, where each
// forward is followed by its own backward. NEVER keeps all, ALWAYS none. Forward-only (EVAL)
// programs keep nothing.
//
// Activation offload (pipeline.offload STAGE_INPUTS) is decided here too, so the executor and the
// memory prediction agree: a micro-batch whose activations are dropped has its stage input moved
// to host memory after its Forward when at least two other compute instructions run on this stage
// before its backward (Backward or BackwardInput; with one, it would come back as soon as it had
// left); the copy back starts as the last compute instruction before that backward starts. The
// prefetch distance is thus one compute instruction: the copy back overlaps a whole forward or
// backward of a micro-batch on this stage (which, under re-materialization, costs far more than
// moving its input), and at most one restored input waits on the device at a time besides the one
// in use. Pure; the executor builds one per program.
#ifndef GPIPE_RUNTIME_EXEC_MICRO_BATCH_PLAN_H_
#define GPIPE_RUNTIME_EXEC_MICRO_BATCH_PLAN_H_

#include <cstddef>
#include <span>
#include <vector>

#include "proto/plan.pb.h"
#include "runtime/schedule/instruction.h"

namespace gpipe {

class MicroBatchPlan {
 public:
  // Instructions naming a chunk or micro-batch outside [0, chunks) x [0, micro_batches) are
  // ignored here (the executor rejects them when it reaches them).
  MicroBatchPlan(const schedule::StageProgram& program, int chunks, int micro_batches,
                 pb::Remat remat, pb::Offload offload);

  // A (chunk, micro-batch) of the program.
  struct Slot {
    int chunk = 0;
    int micro_batch = 0;
    friend bool operator==(const Slot&, const Slot&) = default;
  };

  // Whether the program only runs forward (it ends with ReportEval, not OptimizerStep).
  bool forward_only() const { return forward_only_; }
  // Whether Forward(chunk, micro_batch) keeps the layers' saved tensors for the backward.
  bool KeepsActivations(int chunk, int micro_batch) const;
  // Whether Forward(chunk, micro_batch) moves its stage input to host memory.
  bool Offloads(int chunk, int micro_batch) const;
  // The offloaded micro-batches whose stage inputs start coming back just before instruction
  // `index` of the program runs (empty past the end).
  std::span<const Slot> RestoresBefore(size_t index) const;

 private:
  size_t SlotIndex(int chunk, int micro_batch) const {
    return static_cast<size_t>(chunk) * micro_batches_ + micro_batch;
  }

  int micro_batches_;
  bool forward_only_ = false;
  std::vector<bool> keep_;                   // index SlotIndex(chunk, micro_batch)
  std::vector<bool> offload_;                // index SlotIndex(chunk, micro_batch)
  std::vector<std::vector<Slot>> restores_;  // by instruction index
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_EXEC_MICRO_BATCH_PLAN_H_

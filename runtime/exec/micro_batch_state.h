// MicroBatchStates: what a stage holds for each (chunk, micro-batch) during one step: the stage
// input kept for the backward, the tensors each layer saved, gradients in flight, and weight
// gradients deferred by BackwardInput. State is created by the first instruction that needs it
// and dropped as soon as nothing of it is left to do on this stage, so memory follows the
// schedule; a micro-batch whose state was dropped cannot be touched again in the step.
// Single-threaded; lives for one step.
#ifndef GPIPE_RUNTIME_EXEC_MICRO_BATCH_STATE_H_
#define GPIPE_RUNTIME_EXEC_MICRO_BATCH_STATE_H_

#include <cstdint>
#include <map>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "layers/layer.h"
#include "runtime/core/tensor.h"

namespace gpipe {

// A layer whose parameter gradients BackwardInput deferred to BackwardWeight: what the weight
// half reads.
struct DeferredWeightGrad {
  int layer = 0;
  SavedTensors saved;
  Tensor dy;
};

struct MicroBatch {
  // The stage input, kept until the backward. Received activations stay as they came over the
  // wire (bf16 under training.precision BF16, exact) while re-materialization drops the
  // micro-batch's activations, which halves the stash; the layers get an f32 copy.
  Tensor input;
  Tensor targets;                            // last stage
  std::vector<SavedTensors> saved;           // per layer; empty when dropped for re-materialization
  Tensor output;                             // forward output awaiting SendActivation
  Tensor output_grad;                        // dL/d(output): received, or from the loss
  Tensor input_grad;                         // dL/d(input) awaiting SendGrad
  std::vector<DeferredWeightGrad> deferred;  // BackwardInput -> BackwardWeight
  // Skip connections to and from other chunks, by join layer (model index). Received inputs are
  // kept until the backward (a re-materialized forward joins them again), as `input` is.
  std::map<int, Tensor> skip_inputs;
  std::map<int, Tensor> skip_outputs;    // forward outputs awaiting SendSkip
  std::map<int, Tensor> skip_grads_in;   // received, awaiting the backward
  std::map<int, Tensor> skip_grads_out;  // produced by the backward, awaiting SendSkipGrad
  bool forwarded = false;
  bool input_grad_done = false;      // Backward or BackwardInput ran
  bool weight_grad_pending = false;  // BackwardInput ran, BackwardWeight not yet
};

class MicroBatchStates {
 public:
  // `forward_only`: the step only runs forward (a micro-batch is done once forwarded).
  MicroBatchStates(int chunks, int micro_batches, bool forward_only);

  // INVALID_ARGUMENT when (chunk, m) is outside the step's chunks x micro-batches.
  absl::Status Check(int chunk, int m) const;
  // The state of (chunk, m), created on first use; FAILED_PRECONDITION when that micro-batch
  // already finished on this stage (the instruction would repeat work).
  absl::StatusOr<MicroBatch*> Get(int chunk, int m);
  // Drops (chunk, m)'s state when nothing of it is left to do on this stage.
  void ReleaseIfDone(int chunk, int m);
  // INTERNAL naming the first micro-batch (lowest chunk, then index) that still holds state.
  absl::Status CheckAllReleased() const;

 private:
  int64_t Slot(int chunk, int m) const { return static_cast<int64_t>(chunk) * micro_batches_ + m; }

  int chunks_;
  int micro_batches_;
  bool forward_only_;
  absl::flat_hash_map<int64_t, MicroBatch> state_;  // by Slot(chunk, micro-batch)
  std::vector<bool> finished_;                      // by Slot: its work here is complete
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_EXEC_MICRO_BATCH_STATE_H_

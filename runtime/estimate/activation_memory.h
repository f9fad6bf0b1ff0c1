// PredictActivationMemory: the per-micro-batch memory a schedule makes each stage hold, by kind,
// predicted from the program and the tensor sizes of each model part, before anything runs.
//
// It replays each stage's instruction list the way StageExecutor allocates and frees:
//   boundary       a micro-batch's stage input, from its LoadMicroBatch / receive buffer until
//                  its backward (Backward or BackwardInput) finishes, or until BackwardWeight
//                  when the first layer keeps it for its weight half; receive buffers are
//                  allocated when posted, `recv_lookahead` receives ahead of their instruction;
//   activation     tensors the layers save for backward (kept from Forward when the micro-batch
//                  keeps its activations, else rebuilt for the backward), and the stage output
//                  until its SendActivation; under a split backward, the saved tensors and output
//                  gradients of the layers that split stay until BackwardWeight;
//   boundary_grad  dL/d(stage output) from its receive buffer (or the loss) until the backward
//                  (until BackwardWeight when the last layer splits), and dL/d(stage input)
//                  from the backward until its SendGrad.
//   skip connections that cross parts: a received skip input is boundary memory from its
//                  receive buffer until the join's backward (until its Forward when forward-only),
//                  as the stage input is; a received skip gradient is boundary_grad until the
//                  producer's backward, and a skip input's gradient from the start of the join's
//                  backward until its send (an upper bound: inside the pass the real tensors
//                  overlap less); a local hand-off (both ends on one rank) is held from its send
//                  to its receive.
// Under bf16 storage (training.precision BF16, see runtime/exec/bf16_layer.h) every layer output,
// input gradient and boundary tensor is bf16 (half the bytes), and so is what layers save of their
// inputs and outputs; the data set's input, what layers save as new storage and the loss gradient
// stay f32. The f32 copies a layer computes on live only inside its call (workspace, not counted).
// Under pipeline.offload STAGE_INPUTS (MicroBatchPlan decides which micro-batches and when), an
// offloaded stage input (with the skip connections it received) leaves the device's boundary
// bytes at the end of its Forward and is host
// memory until its backward; it is boundary memory again from the start of the instruction that
// starts its copy back. Copies are taken to finish at once for memory (on the CPU they do; a GPU
// lets go of the device copy when the copy out has finished).
// Sends are taken to complete at their instruction. The peaks are of held memory at instruction
// boundaries plus the activations a Forward or a re-materializing backward builds; temporaries
// inside one layer (an output about to be replaced, a gradient being formed) are not modelled,
// so a measured peak is at or slightly above the prediction (tests/exec pins by how much).
#ifndef GPIPE_RUNTIME_ESTIMATE_ACTIVATION_MEMORY_H_
#define GPIPE_RUNTIME_ESTIMATE_ACTIVATION_MEMORY_H_

#include <cstdint>
#include <map>
#include <vector>

#include "absl/status/statusor.h"
#include "layers/registry.h"
#include "proto/plan.pb.h"
#include "runtime/plan/analyzed_plan.h"
#include "runtime/schedule/program.h"

namespace gpipe {

// One micro-batch's tensors of one model part, in bytes as stored.
struct PartBytes {
  int64_t input = 0;            // the part's input (and the gradient of it)
  int64_t output = 0;           // the part's output (and a received gradient of it)
  int64_t loss_grad = 0;        // the loss's gradient of the output (f32), on the last part
  int64_t saved = 0;            // what its layers save for backward, beyond its input and output
  bool output_saved = false;    // the last layer saves its output (it then outlives the send)
  bool input_deferred = false;  // the first layer saves its input and splits its backward, so
                                // a split backward keeps the input until BackwardWeight
  // Held from BackwardInput to BackwardWeight: the saved tensors and output gradients of the
  // layers that split (activation), and whether the last one does (then the part's output
  // gradient, boundary_grad, is kept too).
  int64_t deferred = 0;
  bool output_grad_deferred = false;
  // Skip connections (skip_add, skip_concat) into or out of the part, by join layer: the bytes of
  // one micro-batch's tensor (the output it carries, and its gradient).
  std::map<int, int64_t> skips;
};

// Held bytes at a stage's peak, per kind (each kind's own peak) and together.
struct StageActivationMemory {
  int64_t boundary = 0;
  int64_t activation = 0;
  int64_t boundary_grad = 0;
  // Peak of the three together (at most the sum of their own peaks, which may come at
  // different instructions).
  int64_t total = 0;
  // pipeline.offload: the peak of host memory holding offloaded stage inputs, and the bytes
  // copied out per step (each comes back once).
  int64_t host = 0;
  int64_t offloaded = 0;
};

// Sizes of every part of the plan (index = part) for micro-batches of `micro_batch_size`
// samples, from the layers' own SavedPerSample declarations, activations stored as
// training.precision makes them (BoundaryDType).
absl::StatusOr<std::vector<PartBytes>> MeasurePartBytes(const AnalyzedPlan& plan,
                                                        const LayerRegistry& registry,
                                                        int64_t micro_batch_size);

// Per stage. `parts` has program.stages * program.chunks entries (index = virtual stage), as
// MeasurePartBytes gives them.
std::vector<StageActivationMemory> PredictActivationMemory(const schedule::Program& program,
                                                           const std::vector<PartBytes>& parts,
                                                           pb::Remat remat, pb::Offload offload,
                                                           int recv_lookahead);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_ESTIMATE_ACTIVATION_MEMORY_H_

// StageCompute: the layer work of one step on one stage, for the executor's instruction
// handlers: loading a micro-batch's samples, running a chunk's layers forward (and again, under
// re-materialization, before its backward), backpropagating (whole, or split into the input and
// weight halves of the zero-bubble schedules), and summing an evaluated micro-batch's loss. It
// holds no state of its own: what a micro-batch keeps lives in its MicroBatch, the device scalars
// in the StepReportBuilder. Single-threaded; lives for one step.
#ifndef GPIPE_RUNTIME_EXEC_STAGE_COMPUTE_H_
#define GPIPE_RUNTIME_EXEC_STAGE_COMPUTE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "layers/layer.h"
#include "proto/control.pb.h"
#include "runtime/core/tensor.h"
#include "runtime/exec/executor_config.h"
#include "runtime/exec/gradient_sync.h"
#include "runtime/exec/micro_batch_plan.h"
#include "runtime/exec/micro_batch_state.h"
#include "runtime/exec/step_report_builder.h"
#include "runtime/schedule/topology.h"

namespace gpipe {

class StageCompute {
 public:
  // All references must outlive the object. `grad_sync`: the replicas' all-reduce, told of every
  // layer's accumulated gradients (null without replicas, or when only forwarding).
  StageCompute(const ExecutorConfig& config, const ExecutorResources& resources,
               const MicroBatchPlan& plan, const pb::StepCommand& command,
               StepReportBuilder& report, GradientSync* grad_sync);

  // Samples of one micro-batch: this replica's share of the mini-batch, split evenly.
  static int64_t MicroBatchSize(const ExecutorConfig& config);
  // The sample indices of this replica's micro-batch `m` in the step command.
  std::span<const int64_t> IndicesOf(int m) const;

  // Fills micro-batch `m`'s stage input (`inputs`: `chunk` is the pipeline's first) and targets
  // (`targets`: its last) from the dataset. Each is checked while it is host data, before the
  // upload (the model's first layer's CheckHostInput, the loss's CheckHostTargets): a bad token
  // or class id fails here, naming the sample, position and range, and no kernel waits for the
  // host to learn of it.
  absl::Status Load(int chunk, int m, bool inputs, bool targets, MicroBatch& mb);
  // Runs the chunk's layers on mb.input (skip joins reading mb.skip_inputs for outputs of other
  // chunks); fills mb.saved (one entry per layer) and returns the chunk's output. The outputs other
  // chunks join go into mb.skip_outputs for SendSkip. `replay` re-materializes a micro-batch
  // already forwarded: layer buffers are not updated a second time and nothing is sent again.
  absl::StatusOr<Tensor> RunLayers(int chunk, int m, MicroBatch& mb, bool replay) const;
  // The Forward instruction's work on a checked micro-batch and what the host keeps of it: the
  // output to send (mb.output), or on the pipeline's last chunk the loss's gradient
  // (mb.output_grad, training; the targets dropped) or the evaluation sums; mb.forwarded set;
  // the input and saved tensors dropped where the step or re-materialization has no more use
  // for them.
  absl::Status Forward(int chunk, int m, MicroBatch& mb);
  // The last chunk: the training loss of the output and its gradient, the loss added to the
  // step's totals.
  absl::StatusOr<Tensor> TrainingLoss(int chunk, const Tensor& output, const Tensor& targets);
  // The last chunk of a forward-only step: the loss and correct predictions of the micro-batch's
  // real samples (the padding that fills the held-out split's last batch, index -1, comes last
  // and counts nowhere), summed per sample rather than scaled to a mini-batch mean.
  absl::Status Evaluate(int chunk, int m, const Tensor& output, const Tensor& targets);

  // Backpropagates micro-batch `m` through the chunk's layers, recomputing its forward first
  // when re-materialization dropped it. With `split`, layers that split their backward only
  // produce dx now and leave their parameter gradients to BackwardWeight; every other layer (and
  // every layer without `split`) accumulates its parameter gradients here.
  absl::Status Backward(int chunk, int m, MicroBatch& mb, bool split);
  // FAILED_PRECONDITION unless `mb` is ready for its backward (forwarded, input kept, output
  // gradient there, not yet backpropagated).
  static absl::Status CheckBackward(const MicroBatch& mb);
  // The parameter gradients a split backward deferred, accumulated.
  absl::Status BackwardWeight(int chunk, int m, MicroBatch& mb);

  // While `layers` is set (work being captured, runtime.cuda.graphs): the local layers whose
  // gradients took a micro-batch are appended to it for the caller to tell the replicas' sync
  // once the work has been issued, instead of being told now (the sync records device events,
  // which a capture refuses). Null: told at once.
  void ListAccumulated(std::vector<int>* layers) { accumulated_ = layers; }

 private:
  LayerContext ContextFor(int chunk, int m, int local_layer, bool replay = false) const;
  // Fills `into` (device memory) with the samples' inputs or targets: directly where the host
  // can write it, else through the device's host staging memory and one copy. `check` sees the
  // host tensor before any copy.
  absl::Status Gather(std::span<const int64_t> indices, bool inputs,
                      const std::function<absl::Status(const Tensor&)>& check, Tensor& into) const;
  // dy plus the gradients of the skip connections that read the layer's output, in the order of
  // skip_readers (the same on any partition, so the sum has the same bits): those of this chunk's
  // joins from `local`, the others received into mb.skip_grads_in. f32; dy itself when none.
  absl::StatusOr<Tensor> AddSkipGrads(int chunk, int local_layer, Tensor dy,
                                      std::map<int, Tensor>& local, MicroBatch& mb) const;
  // A layer's parameter gradients took one more micro-batch.
  absl::Status GradientsAccumulated(int chunk, int local_layer);

  const ExecutorConfig& config_;
  const ExecutorResources& res_;
  const MicroBatchPlan& plan_;
  const pb::StepCommand& command_;
  StepReportBuilder& report_;
  GradientSync* grad_sync_;
  std::vector<int>* accumulated_ = nullptr;
  const int64_t micro_batch_size_;
  const int64_t replica_offset_;  // this replica's first sample in the mini-batch
  const schedule::Topology topology_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_EXEC_STAGE_COMPUTE_H_

#include "runtime/exec/stage_compute.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"

namespace gpipe {

StageCompute::StageCompute(const ExecutorConfig& config, const ExecutorResources& resources,
                           const MicroBatchPlan& plan, const pb::StepCommand& command,
                           StepReportBuilder& report, GradientSync* grad_sync)
    : config_(config),
      res_(resources),
      plan_(plan),
      command_(command),
      report_(report),
      grad_sync_(grad_sync),
      micro_batch_size_(MicroBatchSize(config)),
      replica_offset_(config.global_batch / std::max(1, config.replicas) * config.replica),
      topology_(config.topology()) {}

int64_t StageCompute::MicroBatchSize(const ExecutorConfig& config) {
  return config.global_batch / (int64_t{std::max(1, config.replicas)} * config.micro_batches);
}

std::span<const int64_t> StageCompute::IndicesOf(int m) const {
  return std::span<const int64_t>(command_.sample_indices().data(), command_.sample_indices_size())
      .subspan(static_cast<size_t>(replica_offset_ + m * micro_batch_size_), micro_batch_size_);
}

LayerContext StageCompute::ContextFor(int chunk, int m, int local_layer, bool replay) const {
  const StageModel& model = *res_.chunks[chunk].model;
  LayerContext ctx{.device = res_.device};
  ctx.buffers = res_.chunks[chunk].parameters->buffers_of(local_layer);
  ctx.update_buffers = !replay;
  ctx.training = !plan_.forward_only();
  ctx.seed = config_.seed;
  ctx.step = command_.step();
  ctx.micro_batch = m;
  // Where the micro-batch's samples sit in the whole mini-batch (dropout masks are keyed by it,
  // so they do not depend on the replica count).
  ctx.sample_offset = replica_offset_ + static_cast<int64_t>(m) * micro_batch_size_;
  ctx.layer_index = model.global_index(local_layer);
  ctx.need_input_grad = !(model.holds_model_input() && local_layer == 0);
  return ctx;
}

absl::Status StageCompute::Load(int chunk, int m, bool inputs, bool targets, MicroBatch& mb) {
  const auto indices = IndicesOf(m);
  const StageModel& model = *res_.chunks[chunk].model;
  if (inputs) {
    ASSIGN_OR_RETURN(
        mb.input,
        Tensor::Empty(res_.device, res_.dataset->input_shape().WithBatch(micro_batch_size_),
                      res_.dataset->input_dtype(), MemoryKind::kBoundary));
    const auto check = [&](const Tensor& host) {
      return model.layer(0).CheckHostInput(ContextFor(chunk, m, 0), host);
    };
    RETURN_IF_ERROR(Gather(indices, /*inputs=*/true, check, mb.input));
  }
  if (targets) {
    ASSIGN_OR_RETURN(
        mb.targets,
        Tensor::Empty(res_.device, res_.dataset->target_shape().WithBatch(micro_batch_size_),
                      res_.dataset->target_dtype(), MemoryKind::kData));
    const auto check = [&](const Tensor& host) {
      return model.loss() == nullptr ? absl::OkStatus()
                                     : model.loss()->CheckHostTargets(model.output_shape(), host);
    };
    RETURN_IF_ERROR(Gather(indices, /*inputs=*/false, check, mb.targets));
  }
  return absl::OkStatus();
}

absl::Status StageCompute::Gather(std::span<const int64_t> indices, bool inputs,
                                  const std::function<absl::Status(const Tensor&)>& check,
                                  Tensor& into) const {
  const auto gather = [&](Tensor& out) {
    return inputs ? res_.dataset->GatherInputs(indices, out)
                  : res_.dataset->GatherTargets(indices, out);
  };
  if (into.host_accessible()) {
    RETURN_IF_ERROR(gather(into));
    return check(into);
  }
  ASSIGN_OR_RETURN(Tensor staged, Tensor::Empty(res_.device.host_staging(), into.shape(),
                                                into.dtype(), into.memory_kind()));
  RETURN_IF_ERROR(gather(staged));
  RETURN_IF_ERROR(check(staged));
  return res_.device.CopyFromHost(staged.raw_data(), staged.bytes(), into);
}

absl::StatusOr<Tensor> StageCompute::RunLayers(int chunk, int m, MicroBatch& mb,
                                               bool replay) const {
  const StageModel& model = *res_.chunks[chunk].model;
  std::vector<SavedTensors>& saved = mb.saved;
  saved.assign(model.num_layers(), SavedTensors{});
  // Outputs this chunk's joins read, by producing model layer, while they are still to come.
  std::map<int, Tensor> kept;
  Tensor x = mb.input;
  for (int l = 0; l < model.num_layers(); ++l) {
    const Layer& layer = model.layer(l);
    const LayerContext ctx = ContextFor(chunk, m, l, replay);
    if (res_.parameter_gather != nullptr) {
      // A sharded update's all-gather of this layer's bucket, overlapped with what came before.
      RETURN_IF_ERROR(
          res_.parameter_gather->WaitForLayer(chunk, l, absl::Now() + config_.wait_timeout));
    }
    // After the wait: a product operand's bf16 copy is made from the gathered value.
    ASSIGN_OR_RETURN(const std::span<const Tensor> params,
                     res_.chunks[chunk].parameters->ProductOperandsOf(l));
    absl::StatusOr<Tensor> y;
    if (const SkipJoin* join = layer.skip_join()) {
      const int producer = model.join_producer(l);
      const int self = model.global_index(l);
      const auto local = kept.find(producer);
      const auto received = mb.skip_inputs.find(self);
      if (model.Holds(producer) ? local == kept.end() : received == mb.skip_inputs.end()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "layer '", layer.name(), "' joins the output of '", join->skip_from(), "', which ",
            model.Holds(producer) ? "this chunk did not keep"
                                  : absl::StrCat("has not arrived (RecvSkip(mb=", m,
                                                 ", layer=", self, ") comes before Forward)")));
      }
      y = join->ForwardJoin(ctx, x, model.Holds(producer) ? local->second : received->second,
                            saved[l]);
    } else {
      y = layer.Forward(ctx, params, x, saved[l]);
    }
    if (!y.ok()) return WithContext(y.status(), absl::StrCat("layer '", layer.name(), "'"));
    for (const int reader : model.skip_readers(l)) {
      if (model.Holds(reader)) {
        kept[model.global_index(l)] = *y;
      } else if (!replay) {
        mb.skip_outputs[reader] = *y;
      }
    }
    // A kept output is dropped once its last reader on this chunk has joined it.
    if (layer.skip_join() != nullptr && model.Holds(model.join_producer(l))) {
      const int producer = model.join_producer(l);
      bool more = false;
      for (const int reader : model.skip_readers(producer - model.global_index(0))) {
        more |= reader > model.global_index(l) && model.Holds(reader);
      }
      if (!more) kept.erase(producer);
    }
    // In inference mode nothing is kept for a backward; dropping as we go bounds memory to about
    // one layer's tensors.
    if (plan_.forward_only()) saved[l].clear();
    x = *std::move(y);
  }
  return x;
}

absl::StatusOr<Tensor> StageCompute::TrainingLoss(int chunk, const Tensor& output,
                                                  const Tensor& targets) {
  ASSIGN_OR_RETURN(Tensor * totals, report_.LossTotals());
  return res_.chunks[chunk].model->loss()->Compute(res_.device, output, targets,
                                                   config_.global_batch, *totals);
}

absl::Status StageCompute::Forward(int chunk, int m, MicroBatch& mb) {
  // A bf16 stage input (mixed precision) goes to the layers as it came: they take bf16.
  ASSIGN_OR_RETURN(Tensor output, RunLayers(chunk, m, mb, /*replay=*/false));
  mb.forwarded = true;
  if (topology_.IsLast({config_.stage, chunk})) {
    if (plan_.forward_only()) {
      RETURN_IF_ERROR(Evaluate(chunk, m, output, mb.targets));
    } else {
      ASSIGN_OR_RETURN(Tensor grad, TrainingLoss(chunk, output, mb.targets));
      grad.Retag(MemoryKind::kBoundaryGrad);
      mb.output_grad = std::move(grad);
    }
    mb.targets = Tensor();
  } else {
    mb.output = std::move(output);
  }
  if (plan_.forward_only()) {
    mb.input = Tensor();
    mb.skip_inputs.clear();
    mb.saved.clear();
  } else if (!plan_.KeepsActivations(chunk, m)) {
    // Re-materialized later from the input as received (a bf16 one is half the bytes).
    mb.saved.clear();
  }
  return absl::OkStatus();
}

absl::Status StageCompute::Evaluate(int chunk, int m, const Tensor& output, const Tensor& targets) {
  const auto indices = IndicesOf(m);
  int64_t real = 0;
  while (real < static_cast<int64_t>(indices.size()) && indices[real] != kPaddingSample) ++real;
  for (size_t i = real; i < indices.size(); ++i) {
    if (indices[i] != kPaddingSample) {
      return absl::InvalidArgumentError("evaluation padding (-1) must come last in the batch");
    }
  }
  if (real == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(const Tensor real_output, output.SliceRows(0, real));
  ASSIGN_OR_RETURN(const Tensor real_targets, targets.SliceRows(0, real));
  ASSIGN_OR_RETURN(Tensor * totals, report_.LossTotals());
  const Loss* loss = res_.chunks[chunk].model->loss();
  RETURN_IF_ERROR(
      loss->Compute(res_.device, real_output, real_targets, /*global_batch=*/1, *totals).status());
  // Classification: one prediction per target id.
  report_.CountEvaluated(real, loss->counts_correct() ? real_targets.num_elements() : 0);
  return absl::OkStatus();
}

absl::Status StageCompute::CheckBackward(const MicroBatch& mb) {
  if (!mb.forwarded || !mb.input.defined()) {
    return absl::FailedPreconditionError("backward before Forward");
  }
  if (mb.input_grad_done) return absl::FailedPreconditionError("backward run twice");
  if (!mb.output_grad.defined()) {
    return absl::FailedPreconditionError("the gradient of the stage output has not arrived");
  }
  return absl::OkStatus();
}

// The stage input and the saved tensors the backward needs come first: the forward is
// recomputed when re-materialization dropped them (dropout masks are keyed by step, layer and
// sample, and batch norm recomputes the same micro-batch statistics without touching its running
// statistics, so the replay is exact).
absl::Status StageCompute::Backward(int chunk, int m, MicroBatch& mb, bool split) {
  RETURN_IF_ERROR(CheckBackward(mb));
  if (mb.saved.empty()) {
    RETURN_IF_ERROR(RunLayers(chunk, m, mb, /*replay=*/true).status());
  }
  const StageModel& model = *res_.chunks[chunk].model;
  ParameterStore& parameters = *res_.chunks[chunk].parameters;
  Tensor dy = std::move(mb.output_grad);
  // Gradients of outputs of this chunk that its own joins read, by join layer.
  std::map<int, Tensor> local_skip_grads;
  for (int l = model.num_layers() - 1; l >= 0; --l) {
    const Layer& layer = model.layer(l);
    const LayerContext ctx = ContextFor(chunk, m, l);
    if (!model.skip_readers(l).empty()) {
      ASSIGN_OR_RETURN(dy, AddSkipGrads(chunk, l, std::move(dy), local_skip_grads, mb));
    }
    ASSIGN_OR_RETURN(const std::span<const Tensor> params, parameters.ProductOperandsOf(l));
    absl::StatusOr<Tensor> dx;
    bool deferred = false;
    if (const SkipJoin* join = layer.skip_join()) {
      absl::StatusOr<SkipJoin::Grads> grads = join->BackwardJoin(ctx, mb.saved[l], dy);
      if (grads.ok()) {
        const int self = model.global_index(l);
        if (model.Holds(model.join_producer(l))) {
          local_skip_grads[self] = std::move(grads->dskip);
        } else {
          // Its own storage, counted as a boundary gradient (skip_add's is dy itself, which the
          // layers below still use).
          ASSIGN_OR_RETURN(Tensor out,
                           Tensor::Empty(res_.device, grads->dskip.shape(), grads->dskip.dtype(),
                                         MemoryKind::kBoundaryGrad));
          RETURN_IF_ERROR(res_.device.ops().tensor.Copy(grads->dskip, out));
          mb.skip_grads_out[self] = std::move(out);
        }
        dx = std::move(grads->dx);
      } else {
        dx = grads.status();
      }
    } else if (const SplitBackward* halves = split ? layer.split_backward() : nullptr) {
      deferred = true;
      dx = halves->BackwardInput(ctx, params, mb.saved[l], dy);
      if (dx.ok()) mb.deferred.push_back({l, std::move(mb.saved[l]), dy});
    } else {
      dx = layer.Backward(ctx, params, parameters.grads_of(l), mb.saved[l], dy);
    }
    if (!dx.ok()) return WithContext(dx.status(), absl::StrCat("layer '", layer.name(), "'"));
    if (!deferred) RETURN_IF_ERROR(GradientsAccumulated(chunk, l));
    mb.saved[l].clear();
    dy = *std::move(dx);
  }
  mb.saved.clear();
  mb.input = Tensor();
  mb.skip_inputs.clear();
  mb.input_grad_done = true;
  // A split backward always has its BackwardWeight still to come, even when no layer of the
  // chunk deferred anything (a chunk without parameters): the state lives until then.
  mb.weight_grad_pending = split;
  if (!topology_.IsFirst({config_.stage, chunk})) {
    dy.Retag(MemoryKind::kBoundaryGrad);
    mb.input_grad = std::move(dy);
  }
  return absl::OkStatus();
}

absl::Status StageCompute::BackwardWeight(int chunk, int m, MicroBatch& mb) {
  if (!mb.input_grad_done) {
    return absl::FailedPreconditionError("BackwardWeight before BackwardInput");
  }
  if (!mb.weight_grad_pending) {
    return absl::FailedPreconditionError(
        "BackwardWeight with no weight half pending (a whole Backward ran, or it ran already)");
  }
  const StageModel& model = *res_.chunks[chunk].model;
  ParameterStore& parameters = *res_.chunks[chunk].parameters;
  for (DeferredWeightGrad& deferred : mb.deferred) {
    const Layer& layer = model.layer(deferred.layer);
    // Only layers that split were deferred (Backward).
    const absl::Status status = layer.split_backward()->BackwardWeight(
        ContextFor(chunk, m, deferred.layer), parameters.grads_of(deferred.layer), deferred.saved,
        deferred.dy);
    if (!status.ok()) return WithContext(status, absl::StrCat("layer '", layer.name(), "'"));
    RETURN_IF_ERROR(GradientsAccumulated(chunk, deferred.layer));
    deferred = DeferredWeightGrad{};  // free as we go
  }
  mb.deferred.clear();
  mb.weight_grad_pending = false;
  return absl::OkStatus();
}

absl::StatusOr<Tensor> StageCompute::AddSkipGrads(int chunk, int local_layer, Tensor dy,
                                                  std::map<int, Tensor>& local,
                                                  MicroBatch& mb) const {
  const StageModel& model = *res_.chunks[chunk].model;
  const TensorOps& ops = res_.device.ops().tensor;
  // In f32: a bf16 gradient (mixed precision) is widened exactly.
  const auto widened = [&](const Tensor& t) -> absl::StatusOr<Tensor> {
    if (t.dtype() == DType::kF32) return t;
    ASSIGN_OR_RETURN(Tensor wide,
                     Tensor::Empty(res_.device, t.shape(), DType::kF32, MemoryKind::kActivation));
    RETURN_IF_ERROR(ops.Cast(t, wide));
    return wide;
  };
  ASSIGN_OR_RETURN(Tensor sum, widened(dy));
  bool fresh = dy.dtype() != DType::kF32;  // whether `sum` is storage of our own
  for (const int reader : model.skip_readers(local_layer)) {
    std::map<int, Tensor>& from = model.Holds(reader) ? local : mb.skip_grads_in;
    const auto it = from.find(reader);
    if (it == from.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "layer '", model.layer(local_layer).name(), "': the gradient of its output from layer ",
          reader, model.Holds(reader) ? " was not produced" : " has not arrived",
          model.Holds(reader) ? "" : " (RecvSkipGrad comes before the backward that adds it)"));
    }
    ASSIGN_OR_RETURN(const Tensor g, widened(it->second));
    if (!fresh) {
      ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(res_.device, sum.shape(), DType::kF32,
                                                 MemoryKind::kActivation));
      RETURN_IF_ERROR(ops.Add(sum, g, out));
      sum = std::move(out);
      fresh = true;
    } else {
      RETURN_IF_ERROR(ops.Add(sum, g, sum));
    }
    from.erase(it);
  }
  return sum;
}

// With replicas, the layer's bucket's all-reduce starts once every layer of the bucket has all of
// the step's micro-batches.
absl::Status StageCompute::GradientsAccumulated(int chunk, int local_layer) {
  if (grad_sync_ == nullptr) return absl::OkStatus();
  if (accumulated_ != nullptr) {
    accumulated_->push_back(local_layer);
    return absl::OkStatus();
  }
  return grad_sync_->Accumulated(chunk, local_layer);
}

}  // namespace gpipe

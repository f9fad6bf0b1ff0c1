#include "runtime/exec/stage_executor.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>
#include <variant>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"
#include "runtime/exec/device_busy_time.h"
#include "runtime/exec/gradient_sync.h"
#include "runtime/exec/micro_batch_plan.h"
#include "runtime/exec/micro_batch_state.h"
#include "runtime/exec/step_report_builder.h"
#include "runtime/exec/step_scope.h"
#include "runtime/exec/step_transfers.h"
#include "runtime/schedule/topology.h"

namespace gpipe {
namespace {

// Overload set for std::visit.
template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

// The trace span an instruction gets as a whole; OptimizerStep and ReportEval record their
// parts (the gradient-sync barrier, the update) themselves.
std::optional<TraceKind> TraceKindOf(const schedule::Instruction& instruction) {
  return std::visit(
      Overloaded{
          [](const schedule::LoadMicroBatch&) -> std::optional<TraceKind> {
            return TraceKind::kLoad;
          },
          [](const schedule::Forward&) -> std::optional<TraceKind> { return TraceKind::kForward; },
          [](const schedule::Backward&) -> std::optional<TraceKind> {
            return TraceKind::kBackward;
          },
          [](const schedule::BackwardInput&) -> std::optional<TraceKind> {
            return TraceKind::kBackwardInput;
          },
          [](const schedule::BackwardWeight&) -> std::optional<TraceKind> {
            return TraceKind::kBackwardWeight;
          },
          [](const schedule::RecvActivation&) -> std::optional<TraceKind> {
            return TraceKind::kRecvActivation;
          },
          [](const schedule::RecvGrad&) -> std::optional<TraceKind> {
            return TraceKind::kRecvGrad;
          },
          [](const schedule::SendActivation&) -> std::optional<TraceKind> {
            return TraceKind::kSendActivation;
          },
          [](const schedule::SendGrad&) -> std::optional<TraceKind> {
            return TraceKind::kSendGrad;
          },
          [](const schedule::AllReduceGrads&) -> std::optional<TraceKind> {
            return TraceKind::kAllReduce;
          },
          [](const auto&) -> std::optional<TraceKind> { return std::nullopt; }},
      instruction);
}

}  // namespace

// The state of one step: per-micro-batch tensors, posted receives, sends in flight, counters.
class StageExecutor::Step {
 public:
  Step(StageExecutor& executor, const pb::StepCommand& command)
      : config_(executor.config_),
        program_(executor.program_),
        res_(executor.resources_),
        command_(command),
        micro_batches_(config_.micro_batches),
        micro_batch_size_(config_.global_batch /
                          (int64_t{std::max(1, config_.replicas)} * config_.micro_batches)),
        replica_offset_(config_.global_batch / std::max(1, config_.replicas) * config_.replica),
        topology_{config_.num_stages, config_.chunks},
        plan_(*executor.plan_),
        scope_(config_, command_, res_.trace),
        states_(config_.chunks, micro_batches_, plan_.forward_only()),
        transfers_(scope_, program_, res_, states_, micro_batch_size_),
        report_builder_(scope_, res_.device),
        busy_(res_.device) {
    if (!plan_.forward_only() && res_.replica_reducer != nullptr &&
        res_.gradient_buckets != nullptr) {
      grad_sync_.emplace(*res_.gradient_buckets, *res_.replica_reducer, res_.device, scope_,
                         micro_batches_, config_.replicas);
    }
  }

  absl::StatusOr<pb::StepReport> Run() {
    start_ = absl::Now();
    TraceEvent step_event = scope_.EventAt(command_.eval() ? TraceKind::kEval : TraceKind::kStep);
    step_event.instruction = -1;
    const TraceSpan step_span(res_.trace, step_event);
    res_.device.memory().ResetPeaks();
    if (static_cast<int>(res_.chunks.size()) != config_.chunks) {
      return absl::InternalError(absl::StrCat(scope_.Where(), "the executor has ",
                                              res_.chunks.size(), " chunk(s) of resources for ",
                                              config_.chunks, " chunk(s)"));
    }
    if (config_.replicas > 1 && !plan_.forward_only() &&
        (res_.gradient_buckets == nullptr ||
         (!res_.gradient_buckets->buckets().empty() && res_.replica_reducer == nullptr))) {
      return absl::InternalError(absl::StrCat(
          scope_.Where(), config_.replicas, " replicas but no gradient buckets or replica group"));
    }
    if (command_.sample_indices_size() != config_.global_batch) {
      return absl::InvalidArgumentError(
          absl::StrCat(scope_.Where(), "step command carries ", command_.sample_indices_size(),
                       " sample indices, expected global_batch = ", config_.global_batch));
    }
    if (!plan_.forward_only()) {
      for (int i = 0; i < command_.sample_indices_size(); ++i) {
        if (command_.sample_indices(i) == kPaddingSample) {
          return absl::InvalidArgumentError(
              absl::StrCat(scope_.Where(), "sample ", i,
                           " of the training batch is evaluation padding (-1); "
                           "only a forward-only program pads"));
        }
      }
    }
    RETURN_IF_ERROR(WithContext(transfers_.PostReceivesUpTo(config_.recv_lookahead),
                                absl::StrCat(scope_.Where(), "before the first instruction")));
    for (size_t i = 0; i < program_.instructions.size(); ++i) {
      scope_.set_position(i);
      const schedule::Instruction& instruction = program_.instructions[i];
      absl::Status status;
      {
        std::optional<TraceSpan> span;
        if (const std::optional<TraceKind> kind = TraceKindOf(instruction)) {
          span.emplace(res_.trace, InstructionEvent(*kind, instruction));
        }
        status = std::visit([this](const auto& op) { return Execute(op); }, instruction);
      }
      if (status.ok()) status = transfers_.ReapFinishedSends();
      if (status.ok()) transfers_.PollPostedReceives();
      if (status.ok() && grad_sync_.has_value()) status = grad_sync_->Poll();
      if (!status.ok()) {
        return WithContext(
            status, absl::StrCat(scope_.Where(), "instruction ", schedule::ToString(instruction)));
      }
    }
    if (!report_.has_step()) {
      return absl::InternalError(
          absl::StrCat(scope_.Where(), "the program has no OptimizerStep or ReportEval"));
    }
    return report_;
  }

 private:
  TraceEvent InstructionEvent(TraceKind kind, const schedule::Instruction& instruction) const {
    TraceEvent event = scope_.EventAt(kind);
    event.micro_batch = schedule::MicroBatchOf(instruction).value_or(-1);
    event.chunk = schedule::ChunkOf(instruction);
    switch (kind) {
      case TraceKind::kRecvActivation:
      case TraceKind::kSendGrad:
        event.peer = config_.prev_rank;
        break;
      case TraceKind::kRecvGrad:
      case TraceKind::kSendActivation:
        event.peer = config_.next_rank;
        break;
      default:
        break;
    }
    return event;
  }

  const StageModel& ModelOf(int chunk) const { return *res_.chunks[chunk].model; }
  ParameterStore& ParametersOf(int chunk) const { return *res_.chunks[chunk].parameters; }

  // `replay`: a re-materialized forward, which must not update layer buffers a second time.
  LayerContext ContextFor(int chunk, int micro_batch, int local_layer, bool replay = false) const {
    const StageModel& model = ModelOf(chunk);
    LayerContext ctx{.device = res_.device};
    ctx.buffers = ParametersOf(chunk).buffers_of(local_layer);
    ctx.update_buffers = !replay;
    ctx.training = !plan_.forward_only();
    ctx.seed = config_.seed;
    ctx.step = command_.step();
    ctx.micro_batch = micro_batch;
    // Where the micro-batch's samples sit in the whole mini-batch (dropout masks are keyed by
    // it, so they do not depend on the replica count).
    ctx.sample_offset = replica_offset_ + static_cast<int64_t>(micro_batch) * micro_batch_size_;
    ctx.layer_index = model.global_index(local_layer);
    ctx.need_input_grad = !(model.holds_model_input() && local_layer == 0);
    return ctx;
  }

  template <typename Op>
  absl::StatusOr<MicroBatch*> State(const Op& op) {
    return states_.Get(op.chunk, op.micro_batch);
  }
  template <typename Op>
  void ReleaseIfDone(const Op& op) {
    states_.ReleaseIfDone(op.chunk, op.micro_batch);
  }

  schedule::StageChunk At(int chunk) const { return {config_.stage, chunk}; }

  std::span<const int64_t> IndicesOf(int m) const {
    return std::span<const int64_t>(command_.sample_indices().data(),
                                    command_.sample_indices_size())
        .subspan(static_cast<size_t>(replica_offset_ + m * micro_batch_size_), micro_batch_size_);
  }

  // ---- compute ----------------------------------------------------------------------------

  // Runs the stage's layers on `input`; fills `saved` (one entry per layer) and returns the
  // stage output. `replay` re-materializes a micro-batch already forwarded (see ContextFor).
  absl::StatusOr<Tensor> RunLayers(int chunk, int m, const Tensor& input,
                                   std::vector<SavedTensors>& saved, bool replay) {
    const StageModel& model = ModelOf(chunk);
    saved.assign(model.num_layers(), SavedTensors{});
    Tensor x = input;
    for (int l = 0; l < model.num_layers(); ++l) {
      auto y = model.layer(l).Forward(ContextFor(chunk, m, l, replay),
                                      ParametersOf(chunk).values_of(l), x, saved[l]);
      if (!y.ok()) {
        return WithContext(y.status(), absl::StrCat("layer '", model.layer(l).name(), "'"));
      }
      // In inference mode nothing is kept for a backward; dropping as we go bounds memory to
      // about one layer's tensors.
      if (plan_.forward_only()) saved[l].clear();
      x = *std::move(y);
    }
    return x;
  }

  // The stage input and the saved tensors backward needs, recomputing the forward first when
  // re-materialization dropped them (dropout masks are keyed by step, layer and sample, and batch
  // norm recomputes the same micro-batch statistics without touching its running statistics, so
  // the replay is exact).
  absl::Status PrepareBackward(int chunk, int m, MicroBatch& mb) {
    if (!mb.forwarded || !mb.input.defined()) {
      return absl::FailedPreconditionError("backward before Forward");
    }
    if (mb.input_grad_done) return absl::FailedPreconditionError("backward run twice");
    if (!mb.output_grad.defined()) {
      return absl::FailedPreconditionError("the gradient of the stage output has not arrived");
    }
    if (mb.saved.empty()) {
      ASSIGN_OR_RETURN(const Tensor input, Widened(mb.input));
      RETURN_IF_ERROR(RunLayers(chunk, m, input, mb.saved, /*replay=*/true).status());
    }
    return absl::OkStatus();
  }

  // What the layers compute on: `input` (a stage input or a received gradient) itself, or an
  // f32 copy of a bf16 one (exact).
  absl::StatusOr<Tensor> Widened(const Tensor& input) {
    if (input.dtype() != DType::kBF16) return input;
    ASSIGN_OR_RETURN(Tensor wide,
                     Tensor::Empty(res_.device, input.shape(), DType::kF32, input.memory_kind()));
    RETURN_IF_ERROR(res_.device.ops().tensor.Cast(input, wide));
    return wide;
  }

  // Backpropagates through the chunk's layers. With `split`, layers that split their backward
  // only produce dx now and leave their parameter gradients to BackwardWeight; every other layer
  // (and every layer without `split`) accumulates its parameter gradients here.
  absl::Status RunBackward(int chunk, int m, MicroBatch& mb, bool split) {
    const StageModel& model = ModelOf(chunk);
    ParameterStore& parameters = ParametersOf(chunk);
    Tensor dy = std::move(mb.output_grad);
    for (int l = model.num_layers() - 1; l >= 0; --l) {
      const Layer& layer = model.layer(l);
      const LayerContext ctx = ContextFor(chunk, m, l);
      absl::StatusOr<Tensor> dx;
      const SplitBackward* halves = split ? layer.split_backward() : nullptr;
      const bool deferred = halves != nullptr;
      if (deferred) {
        dx = halves->BackwardInput(ctx, parameters.values_of(l), mb.saved[l], dy);
        if (dx.ok()) mb.deferred.push_back({l, std::move(mb.saved[l]), dy});
      } else {
        dx = layer.Backward(ctx, parameters.values_of(l), parameters.grads_of(l), mb.saved[l], dy);
      }
      if (!dx.ok()) return WithContext(dx.status(), absl::StrCat("layer '", layer.name(), "'"));
      if (!deferred) RETURN_IF_ERROR(GradientsAccumulated(chunk, l));
      mb.saved[l].clear();
      dy = *std::move(dx);
    }
    mb.saved.clear();
    mb.input = Tensor();
    mb.input_grad_done = true;
    // A split backward always has its BackwardWeight still to come, even when no layer of the
    // chunk deferred anything (a chunk without parameters): the state lives until then.
    mb.weight_grad_pending = split;
    if (!topology_.IsFirst(At(chunk))) {
      dy.Retag(MemoryKind::kBoundaryGrad);
      mb.input_grad = std::move(dy);
    }
    return absl::OkStatus();
  }

  bool IsLastStage() const { return config_.stage == config_.num_stages - 1; }

  // ---- instruction handlers -----------------------------------------------------------------

  absl::Status Execute(const schedule::LoadMicroBatch& op) {
    RETURN_IF_ERROR(states_.Check(op.chunk, op.micro_batch));
    RETURN_IF_ERROR(busy_.Begin());
    if (res_.dataset == nullptr) {
      return absl::FailedPreconditionError("this stage has no data source");
    }
    const bool loads_inputs = topology_.IsFirst(At(op.chunk));
    const bool loads_targets = topology_.IsLast(At(op.chunk));
    if (!loads_inputs && !loads_targets) {
      return absl::FailedPreconditionError(
          "only the pipeline's first and last chunk load micro-batches");
    }
    ASSIGN_OR_RETURN(MicroBatch * state, State(op));
    MicroBatch& mb = *state;
    const auto indices = IndicesOf(op.micro_batch);
    if (loads_inputs) {
      ASSIGN_OR_RETURN(
          mb.input,
          Tensor::Empty(res_.device, res_.dataset->input_shape().WithBatch(micro_batch_size_),
                        res_.dataset->input_dtype(), MemoryKind::kBoundary));
      RETURN_IF_ERROR(Gather(indices, /*inputs=*/true, mb.input));
    }
    if (loads_targets) {
      ASSIGN_OR_RETURN(
          mb.targets,
          Tensor::Empty(res_.device, res_.dataset->target_shape().WithBatch(micro_batch_size_),
                        res_.dataset->target_dtype(), MemoryKind::kData));
      RETURN_IF_ERROR(Gather(indices, /*inputs=*/false, mb.targets));
    }
    RETURN_IF_ERROR(busy_.End());
    return absl::OkStatus();
  }

  // Fills `into` (device memory) with the samples' inputs or targets: directly where the host
  // can write it, else through the device's host staging memory and one copy.
  absl::Status Gather(std::span<const int64_t> indices, bool inputs, Tensor& into) {
    const auto gather = [&](Tensor& out) {
      return inputs ? res_.dataset->GatherInputs(indices, out)
                    : res_.dataset->GatherTargets(indices, out);
    };
    if (into.host_accessible()) return gather(into);
    ASSIGN_OR_RETURN(Tensor staged, Tensor::Empty(res_.device.host_staging(), into.shape(),
                                                  into.dtype(), into.memory_kind()));
    RETURN_IF_ERROR(gather(staged));
    return res_.device.CopyFromHost(staged.raw_data(), staged.bytes(), into);
  }

  absl::Status Execute(const schedule::RecvActivation& op) {
    RETURN_IF_ERROR(states_.Check(op.chunk, op.micro_batch));
    ASSIGN_OR_RETURN(MicroBatch * state, State(op));
    ASSIGN_OR_RETURN(state->input, transfers_.CompleteReceive(scope_.position()));
    return absl::OkStatus();
  }

  absl::Status Execute(const schedule::Forward& op) {
    RETURN_IF_ERROR(states_.Check(op.chunk, op.micro_batch));
    RETURN_IF_ERROR(busy_.Begin());
    ASSIGN_OR_RETURN(MicroBatch * state, State(op));
    MicroBatch& mb = *state;
    if (mb.forwarded) return absl::FailedPreconditionError("the micro-batch was forwarded twice");
    if (!mb.input.defined()) {
      return absl::FailedPreconditionError("the micro-batch's input has not arrived");
    }
    ASSIGN_OR_RETURN(Tensor input, Widened(mb.input));
    ASSIGN_OR_RETURN(Tensor output,
                     RunLayers(op.chunk, op.micro_batch, input, mb.saved, /*replay=*/false));
    mb.forwarded = true;
    if (topology_.IsLast(At(op.chunk)) && plan_.forward_only()) {
      if (!mb.targets.defined()) {
        return absl::FailedPreconditionError("the micro-batch's targets were not loaded");
      }
      RETURN_IF_ERROR(Evaluate(op.chunk, op.micro_batch, output, mb.targets));
      mb.targets = Tensor();
    } else if (topology_.IsLast(At(op.chunk))) {
      if (!mb.targets.defined()) {
        return absl::FailedPreconditionError("the micro-batch's targets were not loaded");
      }
      ASSIGN_OR_RETURN(Tensor * totals, report_builder_.LossTotals());
      ASSIGN_OR_RETURN(Tensor grad,
                       ModelOf(op.chunk).loss()->Compute(res_.device, output, mb.targets,
                                                         config_.global_batch, *totals));
      grad.Retag(MemoryKind::kBoundaryGrad);
      mb.output_grad = std::move(grad);
      mb.targets = Tensor();
    } else {
      mb.output = std::move(output);
    }
    if (plan_.forward_only()) {
      mb.input = Tensor();
      mb.saved.clear();
    } else if (!plan_.KeepsActivations(op.chunk, op.micro_batch)) {
      // Re-materialized later from the input as received (a bf16 one is half the bytes).
      mb.saved.clear();
    } else {
      // The layers keep theirs: the f32 copy the first layer may hold serves as the input too.
      mb.input = std::move(input);
    }
    RETURN_IF_ERROR(busy_.End());
    ReleaseIfDone(op);
    return absl::OkStatus();
  }

  // Evaluation of one micro-batch's output: the loss and correct predictions of its real samples
  // (the padding that fills the held-out split's last batch, index -1, comes last and counts
  // nowhere), summed per sample rather than scaled to a mini-batch mean.
  absl::Status Evaluate(int chunk, int m, const Tensor& output, const Tensor& targets) {
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
    ASSIGN_OR_RETURN(Tensor * totals, report_builder_.LossTotals());
    RETURN_IF_ERROR(ModelOf(chunk)
                        .loss()
                        ->Compute(res_.device, real_output, real_targets,
                                  /*global_batch=*/1, *totals)
                        .status());
    // Classification: one prediction per target id.
    report_builder_.CountEvaluated(
        real, ModelOf(chunk).loss()->counts_correct() ? real_targets.num_elements() : 0);
    return absl::OkStatus();
  }

  absl::Status Execute(const schedule::SendActivation& op) {
    RETURN_IF_ERROR(states_.Check(op.chunk, op.micro_batch));
    ASSIGN_OR_RETURN(MicroBatch * state, State(op));
    MicroBatch& mb = *state;
    if (!mb.output.defined()) return absl::FailedPreconditionError("no forward output to send");
    if (topology_.IsLast(At(op.chunk))) {
      return absl::FailedPreconditionError("the pipeline's last chunk has no next stage");
    }
    const TransferKey key{.step = command_.step(),
                          .micro_batch = op.micro_batch,
                          .chunk = topology_.Next(At(op.chunk)).chunk,
                          .kind = TransferKind::kActivation};
    RETURN_IF_ERROR(
        transfers_.StartSend(std::exchange(mb.output, Tensor()), config_.next_rank, key, op.chunk));
    ReleaseIfDone(op);
    return absl::OkStatus();
  }

  absl::Status Execute(const schedule::RecvGrad& op) {
    RETURN_IF_ERROR(states_.Check(op.chunk, op.micro_batch));
    ASSIGN_OR_RETURN(MicroBatch * state, State(op));
    ASSIGN_OR_RETURN(const Tensor received, transfers_.CompleteReceive(scope_.position()));
    ASSIGN_OR_RETURN(state->output_grad, Widened(received));
    return absl::OkStatus();
  }

  absl::Status Execute(const schedule::Backward& op) {
    RETURN_IF_ERROR(states_.Check(op.chunk, op.micro_batch));
    RETURN_IF_ERROR(busy_.Begin());
    ASSIGN_OR_RETURN(MicroBatch * state, State(op));
    MicroBatch& mb = *state;
    RETURN_IF_ERROR(PrepareBackward(op.chunk, op.micro_batch, mb));
    RETURN_IF_ERROR(RunBackward(op.chunk, op.micro_batch, mb, /*split=*/false));
    RETURN_IF_ERROR(busy_.End());
    ReleaseIfDone(op);
    return absl::OkStatus();
  }

  absl::Status Execute(const schedule::BackwardInput& op) {
    RETURN_IF_ERROR(states_.Check(op.chunk, op.micro_batch));
    RETURN_IF_ERROR(busy_.Begin());
    ASSIGN_OR_RETURN(MicroBatch * state, State(op));
    MicroBatch& mb = *state;
    RETURN_IF_ERROR(PrepareBackward(op.chunk, op.micro_batch, mb));
    RETURN_IF_ERROR(RunBackward(op.chunk, op.micro_batch, mb, /*split=*/true));
    RETURN_IF_ERROR(busy_.End());
    ReleaseIfDone(op);
    return absl::OkStatus();
  }

  absl::Status Execute(const schedule::BackwardWeight& op) {
    RETURN_IF_ERROR(states_.Check(op.chunk, op.micro_batch));
    RETURN_IF_ERROR(busy_.Begin());
    ASSIGN_OR_RETURN(MicroBatch * state, State(op));
    MicroBatch& mb = *state;
    if (!mb.input_grad_done) {
      return absl::FailedPreconditionError("BackwardWeight before BackwardInput");
    }
    if (!mb.weight_grad_pending) {
      return absl::FailedPreconditionError(
          "BackwardWeight with no weight half pending (a whole Backward ran, or it ran already)");
    }
    const StageModel& model = ModelOf(op.chunk);
    ParameterStore& parameters = ParametersOf(op.chunk);
    for (DeferredWeightGrad& deferred : mb.deferred) {
      const Layer& layer = model.layer(deferred.layer);
      // Only layers that split were deferred (RunBackward).
      const absl::Status status = layer.split_backward()->BackwardWeight(
          ContextFor(op.chunk, op.micro_batch, deferred.layer), parameters.grads_of(deferred.layer),
          deferred.saved, deferred.dy);
      if (!status.ok()) return WithContext(status, absl::StrCat("layer '", layer.name(), "'"));
      RETURN_IF_ERROR(GradientsAccumulated(op.chunk, deferred.layer));
      deferred = DeferredWeightGrad{};  // free as we go
    }
    mb.deferred.clear();
    mb.weight_grad_pending = false;
    RETURN_IF_ERROR(busy_.End());
    ReleaseIfDone(op);
    return absl::OkStatus();
  }

  absl::Status Execute(const schedule::SendGrad& op) {
    RETURN_IF_ERROR(states_.Check(op.chunk, op.micro_batch));
    ASSIGN_OR_RETURN(MicroBatch * state, State(op));
    MicroBatch& mb = *state;
    if (!mb.input_grad.defined()) return absl::FailedPreconditionError("no input gradient to send");
    const TransferKey key{.step = command_.step(),
                          .micro_batch = op.micro_batch,
                          .chunk = topology_.Previous(At(op.chunk)).chunk,
                          .kind = TransferKind::kGradient};
    RETURN_IF_ERROR(transfers_.StartSend(std::exchange(mb.input_grad, Tensor()), config_.prev_rank,
                                         key, op.chunk));
    ReleaseIfDone(op);
    return absl::OkStatus();
  }

  // A layer's parameter gradients took one more micro-batch: with replicas, its bucket's
  // all-reduce starts once every layer of the bucket has all of the step's micro-batches.
  absl::Status GradientsAccumulated(int chunk, int local_layer) {
    if (!grad_sync_.has_value()) return absl::OkStatus();
    return grad_sync_->Accumulated(chunk, local_layer);
  }

  // The buckets still reducing (and the buffers, averaged) are waited for here: the time this
  // instruction takes is the all-reduce the backward did not hide.
  absl::Status Execute(const schedule::AllReduceGrads&) {
    if (!grad_sync_.has_value()) return absl::OkStatus();
    return grad_sync_->Finish(scope_.Deadline());
  }

  absl::Status Execute(const schedule::OptimizerStep&) {
    if (plan_.forward_only()) {
      return absl::FailedPreconditionError("a forward-only program cannot update parameters");
    }
    RETURN_IF_ERROR(FinishStep());
    RETURN_IF_ERROR(SumTiedGradients());
    ASSIGN_OR_RETURN(Tensor * flag, report_builder_.NonFiniteFlag());
    for (const ChunkRefs& chunk : res_.chunks) {
      RETURN_IF_ERROR(chunk.parameters->FlagNonFiniteGrads(*flag));
    }
    RETURN_IF_ERROR(FillReport());
    bool apply = false;
    {
      const TraceSpan sync(res_.trace, scope_.EventAt(TraceKind::kSync));
      ASSIGN_OR_RETURN(apply, res_.gate.Synchronize(report_));
    }
    const TraceSpan update(res_.trace, scope_.EventAt(TraceKind::kOptimizer));
    for (const ChunkRefs& chunk : res_.chunks) {
      if (apply) {
        RETURN_IF_ERROR(chunk.optimizer->Step(
            res_.device, command_.lr(), chunk.parameters->values(), chunk.parameters->grads()));
      }
      RETURN_IF_ERROR(chunk.parameters->ZeroGrads());
    }
    return absl::OkStatus();
  }

  // For each tie group with a member here: the members' gradients summed in member order, then
  // over the group's ranks, and the sum given to every member, so the identical updates keep
  // tied parameters equal. With two members a + b == b + a exactly: one stage or two agree.
  absl::Status SumTiedGradients() {
    for (size_t t = 0; t < config_.ties.size(); ++t) {
      const pb::TieGroup& tie = config_.ties[t];
      std::vector<Tensor> members;
      for (const std::string& name : tie.parameters()) {
        for (const ChunkRefs& chunk : res_.chunks) {
          const std::vector<std::string>& names = chunk.parameters->names();
          for (size_t i = 0; i < names.size(); ++i) {
            if (names[i] == name) members.push_back(chunk.parameters->grads()[i]);
          }
        }
      }
      if (members.empty()) continue;
      RETURN_IF_ERROR(busy_.Begin());
      const TensorOps& ops = res_.device.ops().tensor;
      Tensor sum = members.front();
      for (size_t i = 1; i < members.size(); ++i) RETURN_IF_ERROR(ops.Add(sum, members[i], sum));
      if (tie.ranks_size() > 1) {
        ReduceGroup* group = t < res_.tie_reducers.size() ? res_.tie_reducers[t] : nullptr;
        const std::string what = absl::StrCat(
            "summing the gradients of tied parameters ", absl::StrJoin(tie.parameters(), ", "),
            " over ranks [", absl::StrJoin(tie.ranks(), ", "), "]");
        if (group == nullptr) {
          return absl::InternalError(absl::StrCat(what, ": no reduce group was made at set-up"));
        }
        std::vector<Tensor> reduced = {sum};
        absl::StatusOr<std::unique_ptr<TransferHandle>> handle =
            group->Start(0, std::span<Tensor>(reduced));
        if (!handle.ok()) return WithContext(handle.status(), what);
        RETURN_IF_ERROR(WithContext((*handle)->Wait(scope_.Deadline()), what));
      }
      for (size_t i = 1; i < members.size(); ++i) RETURN_IF_ERROR(ops.Copy(sum, members[i]));
      RETURN_IF_ERROR(busy_.End());
    }
    return absl::OkStatus();
  }

  absl::Status Execute(const schedule::ReportEval&) {
    if (!plan_.forward_only()) {
      return absl::FailedPreconditionError("ReportEval in a training program");
    }
    RETURN_IF_ERROR(FinishStep());
    RETURN_IF_ERROR(FillReport());
    // Rank 0 learns the loss; its apply/skip answer means nothing without an update.
    const TraceSpan sync(res_.trace, scope_.EventAt(TraceKind::kSync));
    return res_.gate.Synchronize(report_).status();
  }

  // Every send of the step completed and no micro-batch left anything behind.
  absl::Status FinishStep() {
    RETURN_IF_ERROR(transfers_.WaitForSends());
    return states_.CheckAllReleased();
  }

  // The step's report, from the device scalars read once (see StepReportBuilder).
  absl::Status FillReport() {
    ASSIGN_OR_RETURN(const absl::Duration busy, busy_.Total());
    bool counts_correct = false;
    for (const ChunkRefs& chunk : res_.chunks) {
      if (chunk.model->loss() != nullptr) counts_correct = chunk.model->loss()->counts_correct();
    }
    RETURN_IF_ERROR(report_builder_.Fill({.last_stage = IsLastStage(),
                                          .forward_only = plan_.forward_only(),
                                          .counts_correct = counts_correct,
                                          .step_time = absl::Now() - start_,
                                          .busy = busy},
                                         report_));
    report_.set_replica(config_.replica);
    report_.set_bytes_sent(transfers_.bytes_sent());
    report_.set_bytes_received(transfers_.bytes_received());
    if (grad_sync_.has_value()) grad_sync_->Report(report_);
    return absl::OkStatus();
  }

  const ExecutorConfig& config_;
  const schedule::StageProgram& program_;
  ExecutorResources& res_;
  const pb::StepCommand& command_;
  const int micro_batches_;
  const int64_t micro_batch_size_;
  const int64_t replica_offset_;  // this replica's first sample in the mini-batch
  const schedule::Topology topology_;
  const MicroBatchPlan& plan_;

  StepScope scope_;
  MicroBatchStates states_;
  StepTransfers transfers_;
  StepReportBuilder report_builder_;

  std::optional<GradientSync> grad_sync_;  // with data-parallel replicas, training only

  absl::Time start_;
  DeviceBusyTime busy_;
  pb::StepReport report_;
};

StageExecutor::StageExecutor(ExecutorConfig config, schedule::StageProgram program,
                             ExecutorResources resources)
    : config_(std::move(config)),
      program_(std::move(program)),
      resources_(std::move(resources)),
      plan_(std::make_unique<MicroBatchPlan>(program_, config_.chunks, config_.micro_batches,
                                             config_.remat)) {}

StageExecutor::~StageExecutor() = default;

absl::StatusOr<pb::StepReport> StageExecutor::RunStep(const pb::StepCommand& command) {
  Step step(*this, command);
  return step.Run();
}

}  // namespace gpipe

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
#include "runtime/exec/micro_batch_plan.h"
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

bool IsReceive(const schedule::Instruction& instruction) {
  return std::holds_alternative<schedule::RecvActivation>(instruction) ||
         std::holds_alternative<schedule::RecvGrad>(instruction);
}

double Milliseconds(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

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

// The memory kinds the step report breaks peaks down by.
constexpr MemoryKind kReportedKinds[] = {MemoryKind::kBoundary,     MemoryKind::kActivation,
                                         MemoryKind::kBoundaryGrad, MemoryKind::kGradient,
                                         MemoryKind::kParameter,    MemoryKind::kOptimizerState,
                                         MemoryKind::kData};

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
        micro_batch_size_(config_.global_batch / config_.micro_batches),
        topology_{config_.num_stages, config_.chunks},
        plan_(*executor.plan_),
        finished_(static_cast<size_t>(std::max(config_.chunks, 0)) *
                      static_cast<size_t>(std::max(micro_batches_, 0)),
                  false),
        receives_(program_.instructions.size()) {}

  absl::StatusOr<pb::StepReport> Run() {
    start_ = absl::Now();
    TraceEvent step_event = TraceEventAt(command_.eval() ? TraceKind::kEval : TraceKind::kStep);
    step_event.instruction = -1;
    const TraceSpan step_span(res_.trace, step_event);
    res_.device.memory().ResetPeaks();
    if (static_cast<int>(res_.chunks.size()) != config_.chunks) {
      return absl::InternalError(absl::StrCat(Where(), "the executor has ", res_.chunks.size(),
                                              " chunk(s) of resources for ", config_.chunks,
                                              " chunk(s)"));
    }
    if (command_.sample_indices_size() != config_.global_batch) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(), "step command carries ", command_.sample_indices_size(),
                       " sample indices, expected global_batch = ", config_.global_batch));
    }
    if (!plan_.forward_only()) {
      for (int i = 0; i < command_.sample_indices_size(); ++i) {
        if (command_.sample_indices(i) == kPaddingSample) {
          return absl::InvalidArgumentError(absl::StrCat(
              Where(), "sample ", i, " of the training batch is evaluation padding (-1); "
              "only a forward-only program pads"));
        }
      }
    }
    for (size_t i = 0; i < program_.instructions.size(); ++i) {
      if (IsReceive(program_.instructions[i])) receive_positions_.push_back(i);
    }
    RETURN_IF_ERROR(WithContext(PostReceivesUpTo(config_.recv_lookahead),
                                absl::StrCat(Where(), "before the first instruction")));
    for (size_t i = 0; i < program_.instructions.size(); ++i) {
      position_ = i;
      const schedule::Instruction& instruction = program_.instructions[i];
      absl::Status status;
      {
        std::optional<TraceSpan> span;
        if (const std::optional<TraceKind> kind = TraceKindOf(instruction)) {
          span.emplace(res_.trace, InstructionEvent(*kind, instruction));
        }
        status = std::visit([this](const auto& op) { return Execute(op); }, instruction);
      }
      if (status.ok()) status = ReapFinishedSends();
      if (status.ok()) PollPostedReceives();
      if (!status.ok()) {
        return WithContext(status,
                           absl::StrCat(Where(), "instruction ", schedule::ToString(instruction)));
      }
    }
    if (!report_.has_step()) {
      return absl::InternalError(
          absl::StrCat(Where(), "the program has no OptimizerStep or ReportEval"));
    }
    return report_;
  }

 private:
  // A layer whose parameter gradients BackwardInput deferred to BackwardWeight: what the
  // weight half reads.
  struct DeferredWeightGrad {
    int layer = 0;
    SavedTensors saved;
    Tensor dy;
  };

  struct MicroBatch {
    Tensor input;                     // stage input, kept until the backward
    Tensor targets;                   // last stage
    std::vector<SavedTensors> saved;  // per layer; empty when dropped for re-materialization
    Tensor output;                    // forward output awaiting SendActivation
    Tensor output_grad;               // dL/d(output): received, or from the loss
    Tensor input_grad;                // dL/d(input) awaiting SendGrad
    std::vector<DeferredWeightGrad> deferred;  // BackwardInput -> BackwardWeight
    bool forwarded = false;
    bool input_grad_done = false;      // Backward or BackwardInput ran
    bool weight_grad_pending = false;  // BackwardInput ran, BackwardWeight not yet
  };

  std::string Where() const {
    return absl::StrCat("rank ", config_.rank, ", stage ", config_.stage, ", step ",
                        command_.step(), ": ");
  }

  absl::Time Deadline() const { return absl::Now() + config_.wait_timeout; }

  // ---- trace ------------------------------------------------------------------------------

  bool Traced() const {
    return res_.trace != nullptr && res_.trace->Records(command_.step(), command_.eval());
  }
  TraceEvent TraceEventAt(TraceKind kind) const {
    TraceEvent event;
    event.kind = kind;
    event.step = command_.step();
    event.eval = command_.eval();
    event.instruction = static_cast<int32_t>(position_);
    return event;
  }
  TraceEvent InstructionEvent(TraceKind kind, const schedule::Instruction& instruction) const {
    TraceEvent event = TraceEventAt(kind);
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
  // A transfer from its post (begin_ns) until now, when its completion was seen.
  // `chunk`: this stage's chunk (a send's key names the receiver's).
  void RecordTransfer(TraceKind kind, const TransferKey& key, int chunk, int peer, int64_t bytes,
                      int64_t posted_ns, int64_t done_ns = -1) {
    if (!Traced()) return;
    TraceEvent event = TraceEventAt(kind);
    event.instruction = -1;
    event.micro_batch = key.micro_batch;
    event.chunk = chunk;
    event.peer = peer;
    event.bytes = bytes;
    event.begin_ns = posted_ns;
    event.end_ns = done_ns >= 0 ? done_ns : res_.trace->NowNs();
    res_.trace->Add(event);
  }
  int64_t TraceNow() const { return res_.trace != nullptr ? res_.trace->NowNs() : 0; }

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
    ctx.sample_offset = static_cast<int64_t>(micro_batch) * micro_batch_size_;
    ctx.layer_index = model.global_index(local_layer);
    ctx.need_input_grad = !(model.holds_model_input() && local_layer == 0);
    return ctx;
  }

  absl::Status CheckOp(int m, int chunk) const {
    if (m < 0 || m >= micro_batches_) {
      return absl::InvalidArgumentError(
          absl::StrCat("micro-batch ", m, " is outside [0, ", micro_batches_, ")"));
    }
    if (chunk < 0 || chunk >= config_.chunks) {
      return absl::InvalidArgumentError(
          absl::StrCat("chunk ", chunk, " is outside [0, ", config_.chunks, ")"));
    }
    return absl::OkStatus();
  }
  template <typename Op>
  absl::Status CheckOp(const Op& op) const {
    return CheckOp(op.micro_batch, op.chunk);
  }

  int64_t Slot(int chunk, int m) const { return static_cast<int64_t>(chunk) * micro_batches_ + m; }

  // The state of the op's (chunk, micro-batch), created on first use. A micro-batch whose work
  // on this stage is complete has no state left, and an instruction for it repeats work.
  template <typename Op>
  absl::StatusOr<MicroBatch*> State(const Op& op) {
    const int64_t slot = Slot(op.chunk, op.micro_batch);
    if (finished_[slot]) {
      return absl::FailedPreconditionError(
          "the micro-batch already finished on this stage: the instruction repeats work");
    }
    return &state_.try_emplace(slot).first->second;
  }

  // Drops a micro-batch's state once nothing of it is left to do on this stage.
  template <typename Op>
  void ReleaseIfDone(const Op& op) {
    const int64_t slot = Slot(op.chunk, op.micro_batch);
    auto it = state_.find(slot);
    if (it == state_.end()) return;
    const MicroBatch& mb = it->second;
    const bool backward_done =
        plan_.forward_only() ? mb.forwarded : mb.input_grad_done && !mb.weight_grad_pending;
    if (backward_done && !mb.output.defined() && !mb.input_grad.defined()) {
      state_.erase(it);
      finished_[slot] = true;
    }
  }

  schedule::StageChunk At(int chunk) const { return {config_.stage, chunk}; }

  std::span<const int64_t> IndicesOf(int m) const {
    return std::span<const int64_t>(command_.sample_indices().data(),
                                    command_.sample_indices_size())
        .subspan(static_cast<size_t>(m) * micro_batch_size_, micro_batch_size_);
  }

  // ---- receives posted ahead --------------------------------------------------------------

  struct PostedReceive {
    Tensor buffer;
    std::unique_ptr<TransferHandle> handle;
    TransferKey key;
    int chunk = 0;
    int peer = -1;
    int64_t posted_ns = 0;
    int64_t done_ns = -1;  // when a poll first saw it complete
  };

  absl::Status PostReceivesUpTo(int count) {
    while (next_receive_ < receive_positions_.size() && posted_ahead_ < count) {
      RETURN_IF_ERROR(PostNextReceive());
    }
    return absl::OkStatus();
  }

  // Posts the next receive of the program, naming it on failure.
  absl::Status PostNextReceive() {
    const size_t position = receive_positions_[next_receive_];
    const absl::Status posted = PostReceive(position);
    if (!posted.ok()) {
      return WithContext(
          posted, absl::StrCat("posting ", schedule::ToString(program_.instructions[position])));
    }
    ++next_receive_;
    ++posted_ahead_;
    return absl::OkStatus();
  }

  absl::Status PostReceive(size_t position) {
    const schedule::Instruction& instruction = program_.instructions[position];
    const bool activation = std::holds_alternative<schedule::RecvActivation>(instruction);
    const int m = *schedule::MicroBatchOf(instruction);
    const int chunk = schedule::ChunkOf(instruction);
    RETURN_IF_ERROR(CheckOp(m, chunk));
    const Shape& per_sample =
        activation ? ModelOf(chunk).input_shape() : ModelOf(chunk).output_shape();
    const int peer = activation ? config_.prev_rank : config_.next_rank;
    if (peer < 0) {
      return absl::InvalidArgumentError(absl::StrCat("stage ", config_.stage, " has no ",
                                                     activation ? "previous" : "next",
                                                     " stage to receive from"));
    }
    PostedReceive& posted = receives_[position];
    ASSIGN_OR_RETURN(
        posted.buffer,
        Tensor::Empty(res_.device, per_sample.WithBatch(micro_batch_size_), DType::kF32,
                      activation ? MemoryKind::kBoundary : MemoryKind::kBoundaryGrad));
    // Transfers are keyed by the receiving side's chunk (the sender translates, see Send*).
    const TransferKey key{.step = command_.step(),
                          .micro_batch = m,
                          .chunk = chunk,
                          .kind = activation ? TransferKind::kActivation : TransferKind::kGradient};
    posted.key = key;
    posted.chunk = chunk;
    posted.peer = peer;
    posted.posted_ns = TraceNow();
    ASSIGN_OR_RETURN(posted.handle, res_.channel.Recv(posted.buffer, peer, key));
    return absl::OkStatus();
  }

  // Gives every receive posted ahead a chance to progress between instructions (a transport may
  // need that to start the payload transfer); errors surface when the receive is consumed.
  void PollPostedReceives() {
    for (size_t i = consumed_receives_; i < next_receive_; ++i) {
      PostedReceive& posted = receives_[receive_positions_[i]];
      if (posted.handle && posted.handle->Done() && posted.done_ns < 0) {
        posted.done_ns = TraceNow();
      }
    }
  }

  // Waits for the receive at the current position and returns its tensor.
  absl::StatusOr<Tensor> CompleteReceive() {
    // Not posted yet when the lookahead is exhausted: post everything up to and including it.
    while (!receives_[position_].handle && next_receive_ < receive_positions_.size()) {
      RETURN_IF_ERROR(PostNextReceive());
    }
    PostedReceive posted = std::move(receives_[position_]);
    --posted_ahead_;
    ++consumed_receives_;
    RETURN_IF_ERROR(posted.handle->Wait(Deadline()));
    RecordTransfer(posted.key.kind == TransferKind::kActivation ? TraceKind::kTransferActivationIn
                                                                 : TraceKind::kTransferGradIn,
                   posted.key, posted.chunk, posted.peer, posted.buffer.bytes(), posted.posted_ns,
                   posted.done_ns);
    RETURN_IF_ERROR(PostReceivesUpTo(config_.recv_lookahead));
    return std::move(posted.buffer);
  }

  // ---- sends in flight ----------------------------------------------------------------------

  struct InFlightSend {
    TransferKey key;
    std::unique_ptr<TransferHandle> handle;
    int chunk = 0;
    int peer = -1;
    int64_t bytes = 0;
    int64_t posted_ns = 0;
  };

  // `chunk`: the sending chunk (the key names the receiver's).
  absl::Status StartSend(Tensor tensor, int peer, const TransferKey& key, int chunk) {
    if (peer < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage ", config_.stage, " has no peer to send ", ToString(key), " to"));
    }
    const int64_t posted_ns = TraceNow();
    const int64_t bytes = tensor.bytes();
    ASSIGN_OR_RETURN(auto handle, res_.channel.Send(tensor, peer, key));
    sends_.push_back({key, std::move(handle), chunk, peer, bytes, posted_ns});
    return absl::OkStatus();
  }

  void RecordSend(const InFlightSend& send) {
    RecordTransfer(send.key.kind == TransferKind::kActivation ? TraceKind::kTransferActivationOut
                                                               : TraceKind::kTransferGradOut,
                   send.key, send.chunk, send.peer, send.bytes, send.posted_ns);
  }

  // Drops completed sends; a send that failed reports its error here, naming its transfer.
  absl::Status ReapFinishedSends() {
    for (auto it = sends_.begin(); it != sends_.end();) {
      if (!it->handle->Done()) {
        ++it;
        continue;
      }
      RETURN_IF_ERROR(
          WithContext(it->handle->Wait(Deadline()), absl::StrCat("sending ", ToString(it->key))));
      RecordSend(*it);
      it = sends_.erase(it);
    }
    return absl::OkStatus();
  }

  absl::Status WaitForSends() {
    for (InFlightSend& send : sends_) {
      RETURN_IF_ERROR(
          WithContext(send.handle->Wait(Deadline()), absl::StrCat("sending ", ToString(send.key))));
      RecordSend(send);
    }
    sends_.clear();
    return absl::OkStatus();
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
      RETURN_IF_ERROR(RunLayers(chunk, m, mb.input, mb.saved, /*replay=*/true).status());
    }
    return absl::OkStatus();
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
      if (split && layer.SplitsBackward()) {
        dx = layer.BackwardInput(ctx, parameters.values_of(l), mb.saved[l], dy);
        if (dx.ok()) mb.deferred.push_back({l, std::move(mb.saved[l]), dy});
      } else {
        dx = layer.Backward(ctx, parameters.values_of(l), parameters.grads_of(l), mb.saved[l], dy);
      }
      if (!dx.ok()) return WithContext(dx.status(), absl::StrCat("layer '", layer.name(), "'"));
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
    RETURN_IF_ERROR(CheckOp(op));
    const absl::Time begin = absl::Now();
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
      RETURN_IF_ERROR(res_.dataset->GatherInputs(indices, mb.input));
    }
    if (loads_targets) {
      ASSIGN_OR_RETURN(
          mb.targets,
          Tensor::Empty(res_.device, res_.dataset->target_shape().WithBatch(micro_batch_size_),
                        res_.dataset->target_dtype(), MemoryKind::kData));
      RETURN_IF_ERROR(res_.dataset->GatherTargets(indices, mb.targets));
    }
    busy_ += absl::Now() - begin;
    return absl::OkStatus();
  }

  absl::Status Execute(const schedule::RecvActivation& op) {
    RETURN_IF_ERROR(CheckOp(op));
    ASSIGN_OR_RETURN(MicroBatch * state, State(op));
    ASSIGN_OR_RETURN(state->input, CompleteReceive());
    return absl::OkStatus();
  }

  absl::Status Execute(const schedule::Forward& op) {
    RETURN_IF_ERROR(CheckOp(op));
    const absl::Time begin = absl::Now();
    ASSIGN_OR_RETURN(MicroBatch * state, State(op));
    MicroBatch& mb = *state;
    if (mb.forwarded) return absl::FailedPreconditionError("the micro-batch was forwarded twice");
    if (!mb.input.defined()) {
      return absl::FailedPreconditionError("the micro-batch's input has not arrived");
    }
    ASSIGN_OR_RETURN(Tensor output,
                     RunLayers(op.chunk, op.micro_batch, mb.input, mb.saved, /*replay=*/false));
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
      ASSIGN_OR_RETURN(LossResult loss, ModelOf(op.chunk).loss()->Compute(
                                            res_.device, output, mb.targets, config_.global_batch));
      if (!std::isfinite(loss.loss)) non_finite_ = true;
      loss_sum_ += loss.loss;
      if (loss.correct >= 0) correct_ = (correct_ < 0 ? 0 : correct_) + loss.correct;
      loss.grad.Retag(MemoryKind::kBoundaryGrad);
      mb.output_grad = std::move(loss.grad);
      mb.targets = Tensor();
    } else {
      mb.output = std::move(output);
    }
    if (plan_.forward_only()) {
      mb.input = Tensor();
      mb.saved.clear();
    } else if (!plan_.KeepsActivations(op.chunk, op.micro_batch)) {
      mb.saved.clear();
    }
    busy_ += absl::Now() - begin;
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
    ASSIGN_OR_RETURN(LossResult loss,
                     ModelOf(chunk).loss()->Compute(res_.device, real_output, real_targets,
                                                    /*global_batch=*/1));
    if (!std::isfinite(loss.loss)) non_finite_ = true;
    eval_loss_sum_ += loss.loss;
    eval_samples_ += real;
    if (loss.correct >= 0) {  // classification: one prediction per target id
      correct_ = (correct_ < 0 ? 0 : correct_) + loss.correct;
      eval_predictions_ += real_targets.num_elements();
    }
    return absl::OkStatus();
  }

  absl::Status Execute(const schedule::SendActivation& op) {
    RETURN_IF_ERROR(CheckOp(op));
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
        StartSend(std::exchange(mb.output, Tensor()), config_.next_rank, key, op.chunk));
    ReleaseIfDone(op);
    return absl::OkStatus();
  }

  absl::Status Execute(const schedule::RecvGrad& op) {
    RETURN_IF_ERROR(CheckOp(op));
    ASSIGN_OR_RETURN(MicroBatch * state, State(op));
    ASSIGN_OR_RETURN(state->output_grad, CompleteReceive());
    return absl::OkStatus();
  }

  absl::Status Execute(const schedule::Backward& op) {
    RETURN_IF_ERROR(CheckOp(op));
    const absl::Time begin = absl::Now();
    ASSIGN_OR_RETURN(MicroBatch * state, State(op));
    MicroBatch& mb = *state;
    RETURN_IF_ERROR(PrepareBackward(op.chunk, op.micro_batch, mb));
    RETURN_IF_ERROR(RunBackward(op.chunk, op.micro_batch, mb, /*split=*/false));
    busy_ += absl::Now() - begin;
    ReleaseIfDone(op);
    return absl::OkStatus();
  }

  absl::Status Execute(const schedule::BackwardInput& op) {
    RETURN_IF_ERROR(CheckOp(op));
    const absl::Time begin = absl::Now();
    ASSIGN_OR_RETURN(MicroBatch * state, State(op));
    MicroBatch& mb = *state;
    RETURN_IF_ERROR(PrepareBackward(op.chunk, op.micro_batch, mb));
    RETURN_IF_ERROR(RunBackward(op.chunk, op.micro_batch, mb, /*split=*/true));
    busy_ += absl::Now() - begin;
    ReleaseIfDone(op);
    return absl::OkStatus();
  }

  absl::Status Execute(const schedule::BackwardWeight& op) {
    RETURN_IF_ERROR(CheckOp(op));
    const absl::Time begin = absl::Now();
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
      const absl::Status status =
          layer.BackwardWeight(ContextFor(op.chunk, op.micro_batch, deferred.layer),
                               parameters.grads_of(deferred.layer), deferred.saved, deferred.dy);
      if (!status.ok()) return WithContext(status, absl::StrCat("layer '", layer.name(), "'"));
      deferred = DeferredWeightGrad{};  // free as we go
    }
    mb.deferred.clear();
    mb.weight_grad_pending = false;
    busy_ += absl::Now() - begin;
    ReleaseIfDone(op);
    return absl::OkStatus();
  }

  absl::Status Execute(const schedule::SendGrad& op) {
    RETURN_IF_ERROR(CheckOp(op));
    ASSIGN_OR_RETURN(MicroBatch * state, State(op));
    MicroBatch& mb = *state;
    if (!mb.input_grad.defined()) return absl::FailedPreconditionError("no input gradient to send");
    const TransferKey key{.step = command_.step(),
                          .micro_batch = op.micro_batch,
                          .chunk = topology_.Previous(At(op.chunk)).chunk,
                          .kind = TransferKind::kGradient};
    RETURN_IF_ERROR(
        StartSend(std::exchange(mb.input_grad, Tensor()), config_.prev_rank, key, op.chunk));
    ReleaseIfDone(op);
    return absl::OkStatus();
  }

  absl::Status Execute(const schedule::AllReduceGrads&) {
    if (config_.replica_group.size() <= 1) return absl::OkStatus();
    const absl::Time begin = absl::Now();
    std::vector<Tensor> grads;
    for (const ChunkRefs& chunk : res_.chunks) {
      grads.insert(grads.end(), chunk.parameters->grads().begin(), chunk.parameters->grads().end());
    }
    RETURN_IF_ERROR(res_.channel.AllReduceSum(grads, config_.replica_group, Deadline()));
    busy_ += absl::Now() - begin;
    return absl::OkStatus();
  }

  absl::Status Execute(const schedule::OptimizerStep&) {
    if (plan_.forward_only()) {
      return absl::FailedPreconditionError("a forward-only program cannot update parameters");
    }
    RETURN_IF_ERROR(FinishStep());
    RETURN_IF_ERROR(SumTiedGradients());
    for (const ChunkRefs& chunk : res_.chunks) {
      if (!chunk.parameters->GradsFinite()) non_finite_ = true;
    }
    FillReport();
    bool apply = false;
    {
      const TraceSpan sync(res_.trace, TraceEventAt(TraceKind::kSync));
      ASSIGN_OR_RETURN(apply, res_.gate.Synchronize(report_));
    }
    const TraceSpan update(res_.trace, TraceEventAt(TraceKind::kOptimizer));
    for (const ChunkRefs& chunk : res_.chunks) {
      if (apply) {
        RETURN_IF_ERROR(chunk.optimizer->Step(command_.lr(), chunk.parameters->values(),
                                              chunk.parameters->grads()));
      }
      chunk.parameters->ZeroGrads();
    }
    return absl::OkStatus();
  }

  // For each tie group with a member here: the members' gradients summed in member order, then
  // over the group's ranks, and the sum given to every member, so the identical updates keep
  // tied parameters equal. With two members a + b == b + a exactly: one stage or two agree.
  absl::Status SumTiedGradients() {
    for (const pb::TieGroup& tie : config_.ties) {
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
      const absl::Time begin = absl::Now();
      // A simulated device's tensors hold no values: only the all-reduce (its modelled time).
      const bool shape_only = res_.device.kind() == DeviceKind::kSim;
      Tensor sum = members.front();
      for (size_t i = 1; i < members.size() && !shape_only; ++i) {
        float* out = sum.f32();
        const float* g = members[i].f32();
        for (int64_t e = 0; e < sum.num_elements(); ++e) out[e] += g[e];
      }
      if (tie.ranks_size() > 1) {
        const std::vector<int> ranks(tie.ranks().begin(), tie.ranks().end());
        std::vector<Tensor> reduced = {sum};
        RETURN_IF_ERROR(WithContext(res_.channel.AllReduceSum(reduced, ranks, Deadline()),
                                    absl::StrCat("summing the gradients of tied parameters ",
                                                 absl::StrJoin(tie.parameters(), ", "))));
      }
      for (size_t i = 1; i < members.size() && !shape_only; ++i) {
        std::copy_n(sum.f32(), sum.num_elements(), members[i].f32());
      }
      busy_ += absl::Now() - begin;
    }
    return absl::OkStatus();
  }

  absl::Status Execute(const schedule::ReportEval&) {
    if (!plan_.forward_only()) {
      return absl::FailedPreconditionError("ReportEval in a training program");
    }
    RETURN_IF_ERROR(FinishStep());
    FillReport();
    // Rank 0 learns the loss; its apply/skip answer means nothing without an update.
    const TraceSpan sync(res_.trace, TraceEventAt(TraceKind::kSync));
    return res_.gate.Synchronize(report_).status();
  }

  // Every send of the step completed and no micro-batch left anything behind.
  absl::Status FinishStep() {
    RETURN_IF_ERROR(WaitForSends());
    if (!state_.empty()) {
      int64_t slot = state_.begin()->first;
      for (const auto& [s, unused] : state_) slot = std::min(slot, s);  // deterministic message
      return absl::InternalError(absl::StrCat("micro-batch ", slot % micro_batches_, " (chunk ",
                                              slot / micro_batches_,
                                              ") still holds tensors at the end of the step"));
    }
    return absl::OkStatus();
  }

  void FillReport() {
    report_.set_rank(config_.rank);
    report_.set_stage(config_.stage);
    report_.set_step(command_.step());
    if (IsLastStage()) {
      if (!plan_.forward_only()) report_.set_loss(loss_sum_);
      if (correct_ >= 0) report_.set_correct(correct_);
      if (plan_.forward_only()) {
        report_.set_eval_loss_sum(eval_loss_sum_);
        report_.set_eval_samples(eval_samples_);
        report_.set_eval_predictions(eval_predictions_);
      }
    }
    report_.set_non_finite(non_finite_);
    report_.set_step_ms(Milliseconds(absl::Now() - start_));
    report_.set_busy_ms(Milliseconds(busy_));
    const MemoryTracker& memory = res_.device.memory();
    report_.set_peak_bytes(memory.peak());
    report_.set_current_bytes(memory.current());
    for (MemoryKind kind : kReportedKinds) {
      (*report_.mutable_peak_bytes_by_kind())[MemoryKindName(kind)] = memory.peak(kind);
    }
  }

  const ExecutorConfig& config_;
  const schedule::StageProgram& program_;
  ExecutorResources& res_;
  const pb::StepCommand& command_;
  const int micro_batches_;
  const int64_t micro_batch_size_;
  const schedule::Topology topology_;
  const MicroBatchPlan& plan_;

  absl::flat_hash_map<int64_t, MicroBatch> state_;  // by Slot(chunk, micro-batch)
  std::vector<bool> finished_;                      // by Slot: its work here is complete
  std::vector<PostedReceive> receives_;             // indexed by instruction position
  std::vector<size_t> receive_positions_;
  size_t next_receive_ = 0;       // receive_positions_[next_receive_] is the next to post
  size_t consumed_receives_ = 0;  // receives completed by their instruction, in program order
  int posted_ahead_ = 0;
  std::vector<InFlightSend> sends_;
  size_t position_ = 0;

  absl::Time start_;
  absl::Duration busy_;
  double loss_sum_ = 0.0;
  int64_t correct_ = -1;
  double eval_loss_sum_ = 0.0;  // forward-only programs (see Evaluate)
  int64_t eval_samples_ = 0;
  int64_t eval_predictions_ = 0;
  bool non_finite_ = false;
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

#include "runtime/exec/stage_executor.h"

#include <cmath>
#include <optional>
#include <utility>
#include <variant>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"

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
        receives_(program_.instructions.size()) {}

  absl::StatusOr<pb::StepReport> Run() {
    start_ = absl::Now();
    res_.device.memory().ResetPeaks();
    if (command_.sample_indices_size() != config_.global_batch) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(), "step command carries ", command_.sample_indices_size(),
                       " sample indices, expected global_batch = ", config_.global_batch));
    }
    for (size_t i = 0; i < program_.instructions.size(); ++i) {
      if (IsReceive(program_.instructions[i])) receive_positions_.push_back(i);
    }
    RETURN_IF_ERROR(WithContext(PostReceivesUpTo(config_.recv_lookahead),
                                absl::StrCat(Where(), "before the first instruction")));
    for (size_t i = 0; i < program_.instructions.size(); ++i) {
      position_ = i;
      const schedule::Instruction& instruction = program_.instructions[i];
      absl::Status status = std::visit([this](const auto& op) { return Execute(op); }, instruction);
      if (status.ok()) status = ReapFinishedSends();
      if (status.ok()) PollPostedReceives();
      if (!status.ok()) {
        return WithContext(status,
                           absl::StrCat(Where(), "instruction ", schedule::ToString(instruction)));
      }
    }
    if (!report_.has_step()) {
      return absl::InternalError(absl::StrCat(Where(), "the program has no OptimizerStep"));
    }
    return report_;
  }

 private:
  struct MicroBatch {
    Tensor input;                     // stage input, kept until Backward
    Tensor targets;                   // last stage
    std::vector<SavedTensors> saved;  // per layer; empty when dropped for re-materialization
    Tensor output;                    // forward output awaiting SendActivation
    Tensor output_grad;               // dL/d(output): received, or from the loss
    Tensor input_grad;                // dL/d(input) awaiting SendGrad
  };

  std::string Where() const {
    return absl::StrCat("rank ", config_.rank, ", stage ", config_.stage, ", step ",
                        command_.step(), ": ");
  }

  absl::Time Deadline() const { return absl::Now() + config_.wait_timeout; }

  LayerContext ContextFor(int micro_batch, int local_layer) const {
    LayerContext ctx{.device = res_.device};
    ctx.training = true;
    ctx.seed = config_.seed;
    ctx.step = command_.step();
    ctx.micro_batch = micro_batch;
    ctx.sample_offset = static_cast<int64_t>(micro_batch) * micro_batch_size_;
    ctx.layer_index = res_.model.global_index(local_layer);
    ctx.need_input_grad = !(res_.model.holds_model_input() && local_layer == 0);
    return ctx;
  }

  absl::Status CheckMicroBatch(int m) const {
    if (m < 0 || m >= micro_batches_) {
      return absl::InvalidArgumentError(
          absl::StrCat("micro-batch ", m, " is outside [0, ", micro_batches_, ")"));
    }
    return absl::OkStatus();
  }

  MicroBatch& State(int m) {
    auto [it, inserted] = state_.try_emplace(m);
    return it->second;
  }

  std::span<const int64_t> IndicesOf(int m) const {
    return std::span<const int64_t>(command_.sample_indices().data(),
                                    command_.sample_indices_size())
        .subspan(static_cast<size_t>(m) * micro_batch_size_, micro_batch_size_);
  }

  // ---- receives posted ahead --------------------------------------------------------------

  struct PostedReceive {
    Tensor buffer;
    std::unique_ptr<TransferHandle> handle;
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
    RETURN_IF_ERROR(CheckMicroBatch(m));
    const Shape& per_sample = activation ? res_.model.input_shape() : res_.model.output_shape();
    const int peer = activation ? config_.prev_rank : config_.next_rank;
    if (peer < 0) {
      return absl::InvalidArgumentError(absl::StrCat("stage ", config_.stage, " has no ",
                                                     activation ? "previous" : "next",
                                                     " stage to receive from"));
    }
    PostedReceive& posted = receives_[position];
    ASSIGN_OR_RETURN(posted.buffer,
                     Tensor::Empty(res_.device, per_sample.WithBatch(micro_batch_size_),
                                   DType::kF32, MemoryKind::kBoundary));
    const TransferKey key{.step = command_.step(),
                          .micro_batch = m,
                          .chunk = schedule::ChunkOf(instruction),
                          .kind = activation ? TransferKind::kActivation : TransferKind::kGradient};
    ASSIGN_OR_RETURN(posted.handle, res_.channel.Recv(posted.buffer, peer, key));
    return absl::OkStatus();
  }

  // Gives every receive posted ahead a chance to progress between instructions (a transport may
  // need that to start the payload transfer); errors surface when the receive is consumed.
  void PollPostedReceives() {
    for (size_t i = consumed_receives_; i < next_receive_; ++i) {
      PostedReceive& posted = receives_[receive_positions_[i]];
      if (posted.handle) posted.handle->Done();
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
    RETURN_IF_ERROR(PostReceivesUpTo(config_.recv_lookahead));
    return std::move(posted.buffer);
  }

  // ---- sends in flight ----------------------------------------------------------------------

  absl::Status StartSend(Tensor tensor, int peer, const TransferKey& key) {
    if (peer < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage ", config_.stage, " has no peer to send ", ToString(key), " to"));
    }
    ASSIGN_OR_RETURN(auto handle, res_.channel.Send(tensor, peer, key));
    sends_.push_back({key, std::move(handle)});
    return absl::OkStatus();
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
      it = sends_.erase(it);
    }
    return absl::OkStatus();
  }

  absl::Status WaitForSends() {
    for (InFlightSend& send : sends_) {
      RETURN_IF_ERROR(
          WithContext(send.handle->Wait(Deadline()), absl::StrCat("sending ", ToString(send.key))));
    }
    sends_.clear();
    return absl::OkStatus();
  }

  // ---- compute ----------------------------------------------------------------------------

  // Runs the stage's layers on `input`; fills `saved` (one entry per layer) and returns the
  // stage output.
  absl::StatusOr<Tensor> RunLayers(int m, const Tensor& input, std::vector<SavedTensors>& saved) {
    saved.assign(res_.model.num_layers(), SavedTensors{});
    Tensor x = input;
    for (int l = 0; l < res_.model.num_layers(); ++l) {
      auto y =
          res_.model.layer(l).Forward(ContextFor(m, l), res_.parameters.values_of(l), x, saved[l]);
      if (!y.ok()) {
        return WithContext(y.status(), absl::StrCat("layer '", res_.model.layer(l).name(), "'"));
      }
      x = *std::move(y);
    }
    return x;
  }

  bool KeepsActivations(int m) const {
    switch (config_.remat) {
      case pb::NEVER:
        return true;
      case pb::EXCEPT_LAST:
        return m == micro_batches_ - 1;
      case pb::ALWAYS:
        return false;
    }
    return true;
  }

  bool IsFirstStage() const { return config_.stage == 0; }
  bool IsLastStage() const { return config_.stage == config_.num_stages - 1; }

  // ---- instruction handlers -----------------------------------------------------------------

  absl::Status Execute(const schedule::LoadMicroBatch& op) {
    RETURN_IF_ERROR(CheckMicroBatch(op.micro_batch));
    const absl::Time begin = absl::Now();
    if (res_.dataset == nullptr) {
      return absl::FailedPreconditionError("this stage has no data source");
    }
    MicroBatch& mb = State(op.micro_batch);
    const auto indices = IndicesOf(op.micro_batch);
    if (IsFirstStage()) {
      ASSIGN_OR_RETURN(
          mb.input,
          Tensor::Empty(res_.device, res_.dataset->input_shape().WithBatch(micro_batch_size_),
                        res_.dataset->input_dtype(), MemoryKind::kBoundary));
      RETURN_IF_ERROR(res_.dataset->GatherInputs(indices, mb.input));
    }
    if (IsLastStage()) {
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
    RETURN_IF_ERROR(CheckMicroBatch(op.micro_batch));
    ASSIGN_OR_RETURN(State(op.micro_batch).input, CompleteReceive());
    return absl::OkStatus();
  }

  absl::Status Execute(const schedule::Forward& op) {
    RETURN_IF_ERROR(CheckMicroBatch(op.micro_batch));
    const absl::Time begin = absl::Now();
    MicroBatch& mb = State(op.micro_batch);
    if (!mb.input.defined()) {
      return absl::FailedPreconditionError("the micro-batch's input has not arrived");
    }
    ASSIGN_OR_RETURN(Tensor output, RunLayers(op.micro_batch, mb.input, mb.saved));
    if (IsLastStage()) {
      if (!mb.targets.defined()) {
        return absl::FailedPreconditionError("the micro-batch's targets were not loaded");
      }
      ASSIGN_OR_RETURN(LossResult loss, res_.model.loss()->Compute(res_.device, output, mb.targets,
                                                                   config_.global_batch));
      if (!std::isfinite(loss.loss)) non_finite_ = true;
      loss_sum_ += loss.loss;
      if (loss.correct >= 0) correct_ = (correct_ < 0 ? 0 : correct_) + loss.correct;
      mb.output_grad = std::move(loss.grad);
      mb.targets = Tensor();
    } else {
      mb.output = std::move(output);
    }
    if (!KeepsActivations(op.micro_batch)) mb.saved.clear();
    busy_ += absl::Now() - begin;
    return absl::OkStatus();
  }

  absl::Status Execute(const schedule::SendActivation& op) {
    RETURN_IF_ERROR(CheckMicroBatch(op.micro_batch));
    MicroBatch& mb = State(op.micro_batch);
    if (!mb.output.defined()) return absl::FailedPreconditionError("no forward output to send");
    const TransferKey key{.step = command_.step(),
                          .micro_batch = op.micro_batch,
                          .chunk = op.chunk,
                          .kind = TransferKind::kActivation};
    return StartSend(std::exchange(mb.output, Tensor()), config_.next_rank, key);
  }

  absl::Status Execute(const schedule::RecvGrad& op) {
    RETURN_IF_ERROR(CheckMicroBatch(op.micro_batch));
    ASSIGN_OR_RETURN(State(op.micro_batch).output_grad, CompleteReceive());
    return absl::OkStatus();
  }

  absl::Status Execute(const schedule::Backward& op) {
    RETURN_IF_ERROR(CheckMicroBatch(op.micro_batch));
    const absl::Time begin = absl::Now();
    MicroBatch& mb = State(op.micro_batch);
    if (!mb.input.defined()) return absl::FailedPreconditionError("Backward before Forward");
    if (!mb.output_grad.defined()) {
      return absl::FailedPreconditionError("the gradient of the stage output has not arrived");
    }
    if (mb.saved.empty()) {
      // Re-materialization: replay the forward (dropout masks are keyed by micro-batch, so the
      // replay is exact) to rebuild what backward needs.
      RETURN_IF_ERROR(RunLayers(op.micro_batch, mb.input, mb.saved).status());
    }
    Tensor dy = std::move(mb.output_grad);
    for (int l = res_.model.num_layers() - 1; l >= 0; --l) {
      auto dx =
          res_.model.layer(l).Backward(ContextFor(op.micro_batch, l), res_.parameters.values_of(l),
                                       res_.parameters.grads_of(l), mb.saved[l], dy);
      if (!dx.ok()) {
        return WithContext(dx.status(), absl::StrCat("layer '", res_.model.layer(l).name(), "'"));
      }
      mb.saved[l].clear();
      dy = *std::move(dx);
    }
    mb.saved.clear();
    mb.input = Tensor();
    if (!IsFirstStage()) mb.input_grad = std::move(dy);
    if (!mb.output.defined() && !mb.input_grad.defined()) state_.erase(op.micro_batch);
    busy_ += absl::Now() - begin;
    return absl::OkStatus();
  }

  absl::Status Execute(const schedule::SendGrad& op) {
    RETURN_IF_ERROR(CheckMicroBatch(op.micro_batch));
    MicroBatch& mb = State(op.micro_batch);
    if (!mb.input_grad.defined()) return absl::FailedPreconditionError("no input gradient to send");
    const TransferKey key{.step = command_.step(),
                          .micro_batch = op.micro_batch,
                          .chunk = op.chunk,
                          .kind = TransferKind::kGradient};
    RETURN_IF_ERROR(StartSend(std::exchange(mb.input_grad, Tensor()), config_.prev_rank, key));
    state_.erase(op.micro_batch);
    return absl::OkStatus();
  }

  absl::Status Execute(const schedule::AllReduceGrads&) {
    if (config_.replica_group.size() <= 1) return absl::OkStatus();
    const absl::Time begin = absl::Now();
    std::vector<Tensor> grads(res_.parameters.grads().begin(), res_.parameters.grads().end());
    RETURN_IF_ERROR(res_.channel.AllReduceSum(grads, config_.replica_group, Deadline()));
    busy_ += absl::Now() - begin;
    return absl::OkStatus();
  }

  absl::Status Execute(const schedule::OptimizerStep&) {
    RETURN_IF_ERROR(WaitForSends());
    if (!state_.empty()) {
      return absl::InternalError(absl::StrCat("micro-batch ", state_.begin()->first,
                                              " still holds tensors at the end of the step"));
    }
    if (!res_.parameters.GradsFinite()) non_finite_ = true;
    report_.set_rank(config_.rank);
    report_.set_stage(config_.stage);
    report_.set_step(command_.step());
    if (IsLastStage()) {
      report_.set_loss(loss_sum_);
      if (correct_ >= 0) report_.set_correct(correct_);
    }
    report_.set_non_finite(non_finite_);
    report_.set_step_ms(Milliseconds(absl::Now() - start_));
    report_.set_busy_ms(Milliseconds(busy_));
    report_.set_peak_bytes(res_.device.memory().peak());
    report_.set_current_bytes(res_.device.memory().current());
    ASSIGN_OR_RETURN(const bool apply, res_.gate.Synchronize(report_));
    if (apply) {
      RETURN_IF_ERROR(
          res_.optimizer.Step(command_.lr(), res_.parameters.values(), res_.parameters.grads()));
    }
    res_.parameters.ZeroGrads();
    return absl::OkStatus();
  }

  const ExecutorConfig& config_;
  const schedule::StageProgram& program_;
  ExecutorResources& res_;
  const pb::StepCommand& command_;
  const int micro_batches_;
  const int64_t micro_batch_size_;

  absl::flat_hash_map<int, MicroBatch> state_;
  std::vector<PostedReceive> receives_;  // indexed by instruction position
  std::vector<size_t> receive_positions_;
  size_t next_receive_ = 0;       // receive_positions_[next_receive_] is the next to post
  size_t consumed_receives_ = 0;  // receives completed by their instruction, in program order
  int posted_ahead_ = 0;
  struct InFlightSend {
    TransferKey key;
    std::unique_ptr<TransferHandle> handle;
  };
  std::vector<InFlightSend> sends_;
  size_t position_ = 0;

  absl::Time start_;
  absl::Duration busy_;
  double loss_sum_ = 0.0;
  int64_t correct_ = -1;
  bool non_finite_ = false;
  pb::StepReport report_;
};

StageExecutor::StageExecutor(ExecutorConfig config, schedule::StageProgram program,
                             ExecutorResources resources)
    : config_(std::move(config)), program_(std::move(program)), resources_(resources) {}

StageExecutor::~StageExecutor() = default;

absl::StatusOr<pb::StepReport> StageExecutor::RunStep(const pb::StepCommand& command) {
  Step step(*this, command);
  return step.Run();
}

}  // namespace gpipe

#include "runtime/exec/stage_executor.h"

#include <map>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/exec/device_busy_time.h"
#include "runtime/exec/gradient_sync.h"
#include "runtime/exec/instruction_graphs.h"
#include "runtime/exec/micro_batch_plan.h"
#include "runtime/exec/micro_batch_state.h"
#include "runtime/exec/sharded_update.h"
#include "runtime/exec/stage_compute.h"
#include "runtime/exec/stage_input_offload.h"
#include "runtime/exec/stage_update.h"
#include "runtime/exec/step_graphs.h"
#include "runtime/exec/step_report_builder.h"
#include "runtime/exec/step_scope.h"
#include "runtime/exec/step_transfers.h"
#include "runtime/schedule/topology.h"

namespace gpipe {
namespace {

// The replicas' all-reduce of a training step's gradients; null with one replica or forward-only.
std::unique_ptr<GradientSync> GradientSyncFor(const ExecutorConfig& config,
                                              const ExecutorResources& res,
                                              const MicroBatchPlan& plan, const StepScope& scope) {
  if (plan.forward_only() || res.replica_reducer == nullptr || res.gradient_buckets == nullptr) {
    return nullptr;
  }
  return std::make_unique<GradientSync>(
      *res.gradient_buckets, *res.replica_reducer, res.device, scope, config.micro_batches,
      config.replicas,
      config.shard_optimizer_state ? Collective::kReduceScatter : Collective::kAllReduce);
}

}  // namespace

// The state of one step: per-micro-batch tensors, posted receives, sends in flight, counters.
// Run checks the command and dispatches each instruction to its handler (Execute).
class StageExecutor::Step {
 public:
  Step(StageExecutor& executor, const pb::StepCommand& command)
      : config_(executor.config_),
        program_(executor.program_),
        res_(executor.resources_),
        command_(command),
        topology_(config_.topology()),
        plan_(*executor.plan_),
        scope_(config_, command_, res_.trace),
        states_(config_.chunks, config_.micro_batches, plan_.forward_only()),
        transfers_(scope_, program_, res_, states_, StageCompute::MicroBatchSize(config_)),
        report_builder_(
            scope_, res_.device,
            StepGraphs::Active(plan_, *executor.graphs_) ? *executor.scalars_ : step_scalars_),
        grad_sync_(GradientSyncFor(config_, res_, plan_, scope_)),
        compute_(config_, res_, plan_, command_, report_builder_, grad_sync_.get()),
        graphs_(config_, res_, plan_, *executor.graphs_, compute_, report_builder_,
                grad_sync_.get()),
        offload_(res_.device),
        busy_(res_.device) {
    if (graphs_.active()) {
      transfers_.ReceiveInto([this](const TransferKey& key) { return graphs_.ReceiveBuffer(key); });
    }
  }

  absl::StatusOr<pb::StepReport> Run() {
    start_ = absl::Now();
    TraceEvent step_event = scope_.EventAt(command_.eval() ? TraceKind::kEval : TraceKind::kStep);
    step_event.instruction = -1;
    const TraceSpan step_span(res_.trace, step_event);
    res_.device.memory().ResetPeaks();
    res_.device.offload_memory().ResetPeaks();
    RETURN_IF_ERROR(CheckCommand());
    if (graphs_.active()) {
      RETURN_IF_ERROR(WithContext(graphs_.Prepare(),
                                  absl::StrCat(scope_.Where(), "before the first instruction")));
    }
    RETURN_IF_ERROR(WithContext(transfers_.PostReceivesUpTo(config_.recv_lookahead),
                                absl::StrCat(scope_.Where(), "before the first instruction")));
    for (size_t i = 0; i < program_.instructions.size(); ++i) {
      scope_.set_position(i);
      const schedule::Instruction& instruction = program_.instructions[i];
      absl::Status status;
      {
        std::optional<TraceSpan> span;
        if (std::optional<TraceEvent> event = scope_.InstructionEvent(instruction)) {
          span.emplace(res_.trace, *event);
        }
        res_.device.LabelWork(absl::StrCat("instruction ", schedule::ToString(instruction),
                                           " of step ", command_.step()));
        status = StartRestores(i);
        if (status.ok()) {
          status = std::visit([this](const auto& op) { return Execute(op); }, instruction);
        }
      }
      if (status.ok()) status = offload_.Poll();
      if (status.ok()) status = transfers_.ReapFinishedSends();
      if (status.ok()) transfers_.PollPostedReceives();
      if (status.ok() && grad_sync_ != nullptr) status = grad_sync_->Poll();
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
  // The resources fit the configuration and the command fits the program.
  absl::Status CheckCommand() const {
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
    if (plan_.forward_only()) return absl::OkStatus();
    for (int i = 0; i < command_.sample_indices_size(); ++i) {
      if (command_.sample_indices(i) == kPaddingSample) {
        return absl::InvalidArgumentError(
            absl::StrCat(scope_.Where(), "sample ", i,
                         " of the training batch is evaluation padding (-1); "
                         "only a forward-only program pads"));
      }
    }
    return absl::OkStatus();
  }

  // pipeline.offload: the copies back that start with instruction `index` (MicroBatchPlan).
  absl::Status StartRestores(size_t index) {
    for (const MicroBatchPlan::Slot& slot : plan_.RestoresBefore(index)) {
      RETURN_IF_ERROR(WithContext(offload_.StartRestore(slot.chunk, slot.micro_batch),
                                  "starting the copy back of an offloaded stage input"));
    }
    return absl::OkStatus();
  }

  // The state of the instruction's micro-batch, after checking its (chunk, micro-batch).
  template <typename Op>
  absl::StatusOr<MicroBatch*> State(const Op& op) {
    RETURN_IF_ERROR(states_.Check(op.chunk, op.micro_batch));
    return states_.Get(op.chunk, op.micro_batch);
  }
  template <typename Op>
  void ReleaseIfDone(const Op& op) {
    states_.ReleaseIfDone(op.chunk, op.micro_batch);
  }
  schedule::StageChunk At(int chunk) const { return {config_.stage, chunk}; }

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
    ASSIGN_OR_RETURN(MicroBatch * mb, states_.Get(op.chunk, op.micro_batch));
    RETURN_IF_ERROR(compute_.Load(op.chunk, op.micro_batch, loads_inputs, loads_targets, *mb));
    return busy_.End();
  }

  absl::Status Execute(const schedule::RecvActivation& op) {
    ASSIGN_OR_RETURN(MicroBatch * mb, State(op));
    ASSIGN_OR_RETURN(mb->input, transfers_.CompleteReceive(scope_.position()));
    return absl::OkStatus();
  }

  absl::Status Execute(const schedule::Forward& op) {
    RETURN_IF_ERROR(states_.Check(op.chunk, op.micro_batch));
    RETURN_IF_ERROR(busy_.Begin());
    ASSIGN_OR_RETURN(MicroBatch * state, states_.Get(op.chunk, op.micro_batch));
    MicroBatch& mb = *state;
    if (mb.forwarded) return absl::FailedPreconditionError("the micro-batch was forwarded twice");
    if (!mb.input.defined()) {
      return absl::FailedPreconditionError("the micro-batch's input has not arrived");
    }
    if (topology_.IsLast(At(op.chunk)) && !mb.targets.defined()) {
      return absl::FailedPreconditionError("the micro-batch's targets were not loaded");
    }
    if (graphs_.Captures(op.chunk)) {
      RETURN_IF_ERROR(graphs_.Forward(op, mb));
    } else {
      RETURN_IF_ERROR(compute_.Forward(op.chunk, op.micro_batch, mb));
    }
    RETURN_IF_ERROR(busy_.End());
    if (plan_.Offloads(op.chunk, op.micro_batch)) {
      // Waits in host memory until the instruction before its backward (pipeline.offload).
      RETURN_IF_ERROR(offload_.Park(op.chunk, op.micro_batch,
                                    {.input = std::exchange(mb.input, Tensor()),
                                     .skips = std::exchange(mb.skip_inputs, {})}));
    }
    ReleaseIfDone(op);
    return absl::OkStatus();
  }

  absl::Status Execute(const schedule::SendActivation& op) {
    ASSIGN_OR_RETURN(MicroBatch * mb, State(op));
    if (!mb->output.defined()) return absl::FailedPreconditionError("no forward output to send");
    if (topology_.IsLast(At(op.chunk))) {
      return absl::FailedPreconditionError("the pipeline's last chunk has no next stage");
    }
    const TransferKey key{.step = command_.step(),
                          .micro_batch = op.micro_batch,
                          .chunk = topology_.Next(At(op.chunk)).chunk,
                          .kind = TransferKind::kActivation};
    RETURN_IF_ERROR(transfers_.StartSend(std::exchange(mb->output, Tensor()),
                                         config_.NeighbourRank(op.chunk, /*next=*/true), key,
                                         op.chunk));
    ReleaseIfDone(op);
    return absl::OkStatus();
  }

  absl::Status Execute(const schedule::RecvGrad& op) {
    ASSIGN_OR_RETURN(MicroBatch * mb, State(op));
    // A bf16 gradient (mixed precision) stays bf16: the last layer takes it as it is.
    ASSIGN_OR_RETURN(mb->output_grad, transfers_.CompleteReceive(scope_.position()));
    return absl::OkStatus();
  }

  // Backward and BackwardInput, its split half: the same work, BackwardInput leaving the
  // parameter gradients of the layers that split theirs to BackwardWeight.
  template <typename Op>
  requires std::is_same_v<Op, schedule::Backward> || std::is_same_v<Op, schedule::BackwardInput>
      absl::Status Execute(const Op& op) {
    constexpr bool kSplit = std::is_same_v<Op, schedule::BackwardInput>;
    RETURN_IF_ERROR(states_.Check(op.chunk, op.micro_batch));
    RETURN_IF_ERROR(busy_.Begin());
    ASSIGN_OR_RETURN(MicroBatch * mb, states_.Get(op.chunk, op.micro_batch));
    if (plan_.Offloads(op.chunk, op.micro_batch) && mb->forwarded && !mb->input_grad_done) {
      ASSIGN_OR_RETURN(StageInputs inputs, offload_.Take(op.chunk, op.micro_batch));
      mb->input = std::move(inputs.input);
      mb->skip_inputs = std::move(inputs.skips);
    }
    if (!kSplit && graphs_.Captures(op.chunk)) {
      RETURN_IF_ERROR(graphs_.Backward(op.chunk, op.micro_batch, *mb));
    } else {
      RETURN_IF_ERROR(compute_.Backward(op.chunk, op.micro_batch, *mb, kSplit));
    }
    RETURN_IF_ERROR(busy_.End());
    ReleaseIfDone(op);
    return absl::OkStatus();
  }

  absl::Status Execute(const schedule::BackwardWeight& op) {
    RETURN_IF_ERROR(states_.Check(op.chunk, op.micro_batch));
    RETURN_IF_ERROR(busy_.Begin());
    ASSIGN_OR_RETURN(MicroBatch * mb, states_.Get(op.chunk, op.micro_batch));
    RETURN_IF_ERROR(compute_.BackwardWeight(op.chunk, op.micro_batch, *mb));
    RETURN_IF_ERROR(busy_.End());
    ReleaseIfDone(op);
    return absl::OkStatus();
  }

  absl::Status Execute(const schedule::SendGrad& op) {
    ASSIGN_OR_RETURN(MicroBatch * mb, State(op));
    if (!mb->input_grad.defined()) {
      return absl::FailedPreconditionError("no input gradient to send");
    }
    const TransferKey key{.step = command_.step(),
                          .micro_batch = op.micro_batch,
                          .chunk = topology_.Previous(At(op.chunk)).chunk,
                          .kind = TransferKind::kGradient};
    RETURN_IF_ERROR(transfers_.StartSend(std::exchange(mb->input_grad, Tensor()),
                                         config_.NeighbourRank(op.chunk, /*next=*/false), key,
                                         op.chunk));
    ReleaseIfDone(op);
    return absl::OkStatus();
  }

  // Skip connections across virtual stages: the output a join layer on another chunk reads goes
  // to the rank that runs it (keyed by that join), its gradient comes back the same way.
  absl::Status Execute(const schedule::SendSkip& op) {
    return SendSkipTensor(op, &MicroBatch::skip_outputs, TransferKind::kActivation,
                          "the output it reads (Forward of this chunk produces it, once)");
  }
  absl::Status Execute(const schedule::SendSkipGrad& op) {
    return SendSkipTensor(op, &MicroBatch::skip_grads_out, TransferKind::kGradient,
                          "the gradient of its input (the backward of this chunk produces it, "
                          "once)");
  }
  absl::Status Execute(const schedule::RecvSkip& op) {
    ASSIGN_OR_RETURN(MicroBatch * mb, State(op));
    if (mb->forwarded) {
      return absl::FailedPreconditionError(
          "the skip input arrives after the Forward that joins it");
    }
    ASSIGN_OR_RETURN(mb->skip_inputs[op.skip_layer], transfers_.CompleteReceive(scope_.position()));
    return absl::OkStatus();
  }
  absl::Status Execute(const schedule::RecvSkipGrad& op) {
    ASSIGN_OR_RETURN(MicroBatch * mb, State(op));
    if (mb->input_grad_done) {
      return absl::FailedPreconditionError(
          "the skip gradient arrives after the backward that adds it in");
    }
    ASSIGN_OR_RETURN(mb->skip_grads_in[op.skip_layer],
                     transfers_.CompleteReceive(scope_.position()));
    return absl::OkStatus();
  }

  // Sends the tensor `held` keeps for join layer op.skip_layer to the other end of its route:
  // the join's chunk for an output (kActivation), the producer's for a gradient. The key names the
  // receiving chunk, which the route gives.
  template <typename Op>
  absl::Status SendSkipTensor(const Op& op, std::map<int, Tensor> MicroBatch::*held,
                              TransferKind kind, const char* what) {
    ASSIGN_OR_RETURN(MicroBatch * mb, State(op));
    std::map<int, Tensor>& tensors = mb->*held;
    const auto it = tensors.find(op.skip_layer);
    if (it == tensors.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("nothing to send for skip layer ", op.skip_layer, ": ", what));
    }
    const auto link = config_.skips.find(op.skip_layer);
    const bool to_join = kind == TransferKind::kActivation;
    const int receiver_chunk = link == config_.skips.end() ? 0
                               : to_join                   ? link->second.join_chunk
                                                           : link->second.producer_chunk;
    const TransferKey key{.step = command_.step(),
                          .micro_batch = op.micro_batch,
                          .chunk = receiver_chunk,
                          .kind = kind,
                          .skip_layer = op.skip_layer};
    // No route to this layer: SkipPeerRank is -1 and StartSend refuses, naming the key.
    RETURN_IF_ERROR(transfers_.StartSend(std::move(it->second), config_.SkipPeerRank(op.skip_layer),
                                         key, op.chunk));
    tensors.erase(it);
    ReleaseIfDone(op);
    return absl::OkStatus();
  }

  // The buckets still reducing (and the buffers, averaged) are waited for here: the time this
  // instruction takes is the all-reduce the backward did not hide.
  absl::Status Execute(const schedule::AllReduceGrads&) {
    if (grad_sync_ == nullptr) return absl::OkStatus();
    return grad_sync_->Finish(scope_.Deadline());
  }

  absl::Status Execute(const schedule::OptimizerStep&) {
    if (plan_.forward_only()) {
      return absl::FailedPreconditionError("a forward-only program cannot update parameters");
    }
    RETURN_IF_ERROR(FinishStep());
    ASSIGN_OR_RETURN(Tensor * flag, report_builder_.NonFiniteFlag());
    StageUpdate update(config_, res_, busy_);
    RETURN_IF_ERROR(update.Prepare(scope_.Deadline(), *flag, report_));
    RETURN_IF_ERROR(FillReport());
    pb::StepDecision decision;
    {
      const TraceSpan sync(res_.trace, scope_.EventAt(TraceKind::kSync));
      ASSIGN_OR_RETURN(decision, res_.gate.Synchronize(report_));
    }
    const TraceSpan span(res_.trace, scope_.EventAt(TraceKind::kOptimizer));
    return update.Apply(decision, command_.lr());
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
    RETURN_IF_ERROR(offload_.Finish());
    return states_.CheckAllReleased();
  }

  // The step's report, from the device scalars read once (see StepReportBuilder).
  absl::Status FillReport() {
    ASSIGN_OR_RETURN(const absl::Duration busy, busy_.Total());
    bool counts_correct = false;
    for (const ChunkRefs& chunk : res_.chunks) {
      if (chunk.model->loss() != nullptr) counts_correct = chunk.model->loss()->counts_correct();
    }
    RETURN_IF_ERROR(report_builder_.Fill({.last_stage = config_.stage == config_.num_stages - 1,
                                          .forward_only = plan_.forward_only(),
                                          .counts_correct = counts_correct,
                                          .step_time = absl::Now() - start_,
                                          .busy = busy},
                                         report_));
    report_.set_replica(config_.replica);
    report_.set_bytes_sent(transfers_.bytes_sent());
    report_.set_bytes_received(transfers_.bytes_received());
    if (grad_sync_ != nullptr) grad_sync_->Report(report_);
    if (graphs_.active()) graphs_.Report(report_);
    if (config_.shard_optimizer_state && !plan_.forward_only() &&
        res_.parameter_gather != nullptr) {
      report_.set_all_gather_ms(absl::ToDoubleMilliseconds(res_.parameter_gather->TakeWaited()));
    }
    if (config_.offload == pb::STAGE_INPUTS && !plan_.forward_only()) {
      report_.set_peak_offload_bytes(res_.device.offload_memory().peak());
      report_.set_offloaded_bytes(offload_.offloaded_bytes());
      report_.set_offload_wait_ms(absl::ToDoubleMilliseconds(offload_.waited()));
    }
    return absl::OkStatus();
  }

  const ExecutorConfig& config_;
  const schedule::StageProgram& program_;
  ExecutorResources& res_;
  const pb::StepCommand& command_;
  const schedule::Topology topology_;
  const MicroBatchPlan& plan_;
  // The report's device scalars: the executor's (kept across steps) when graphs replay work that
  // adds into them, else this step's own (allocated when first used, gone with the step).
  StepScalars step_scalars_;

  StepScope scope_;
  MicroBatchStates states_;
  StepTransfers transfers_;
  StepReportBuilder report_builder_;
  std::unique_ptr<GradientSync> grad_sync_;  // with data-parallel replicas, training only
  StageCompute compute_;
  StepGraphs graphs_;  // runtime.cuda.graphs: captured chunks' Forward and Backward
  // pipeline.offload STAGE_INPUTS: the stage inputs waiting in host memory.
  StageInputOffload offload_;

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
                                             config_.remat, config_.offload)),
      scalars_(std::make_unique<StepScalars>()),
      graphs_(std::make_unique<InstructionGraphs>(resources_.device, config_, program_,
                                                  resources_.chunks)) {}

StageExecutor::~StageExecutor() = default;

absl::StatusOr<pb::StepReport> StageExecutor::RunStep(const pb::StepCommand& command) {
  Step step(*this, command);
  return step.Run();
}

}  // namespace gpipe

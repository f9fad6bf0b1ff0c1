// The step protocol between rank 0 (coordinator, also stage 0's worker) and every rank.
//
//   start-up   rank 0: load + validate the plan, infer shapes, partition, build and verify the
//              schedule (ResolveJob). It sends each rank r a Setup (tag kSetup): either
//              {error} — every rank then fails with that message and MPI finalizes normally
//              — or {resolved plan, stage table, rank r's stage and program, init/export
//              choices}. Ranks != 0 wait up to --startup-timeout for it.
//   groups     before the first step, the ranks that sum tensors together make their groups
//              (DataChannel::CreateReduceGroup), never mid-step: with pipeline.data_parallel
//              D > 1 (Setup.layout: replica r's stage s is rank r * stages + s) a stage's D
//              replicas build the same gradient buckets and their group; then, in tie order,
//              the ranks of each tie group of their replica (Setup.ties).
//   each step  rank 0 broadcasts a StepCommand {step, lr, sample indices} (kStepCommand); the lr
//              follows training.lr_schedule over the updates applied so far.
//              Every rank runs its stage program, replica r on its share of the indices (the
//              r-th of D equal slices); the buckets' all-reduces start during the backward and
//              end at the program's AllReduceGrads. At the program's OptimizerStep, each rank
//              gathers its StepReport to rank 0 (kStepReport); rank 0 decides apply/skip (skip if
//              any rank saw a non-finite loss or gradient) and broadcasts a StepDecision
//              (kDecision); every rank applies or skips the update alike. Rank 0 prints the
//              progress line and writes the metrics record. Before the report, ranks holding
//              tied parameters (Setup.ties) sum those gradients among themselves. With
//              training.clip_grad_norm each report carries its parameters' squared-gradient sums
//              (each tie counted once), rank 0 adds replica 0's in model parameter order and
//              the decision carries grad_scale = C / (norm + 1e-6) when below 1, by which every
//              rank multiplies its gradients before the update.
//   evaluation with training.eval_every, every eval_every steps and after the last, rank 0
//              broadcasts one StepCommand {eval, indices} per batch of the held-out split (its
//              last batch padded with -1). Every rank runs Setup.eval_program (forward only, the
//              same parts) instead of the training program; at its ReportEval the reports meet
//              at the same barrier (the decision is ignored) and rank 0 adds the last stage's
//              sums (loss, samples, correct predictions) into the evaluation line and record.
//   checkpoint with a plan's checkpoint section, after every checkpoint.every_steps steps,
//              after the run's last step and when the job is asked to stop, rank 0 empties
//              DIR/step-N and broadcasts StepCommand {checkpoint, step N}; every rank meets in
//              CheckpointSession::Save (kCheckpoint: replica 0's ranks write their shards, rank 0
//              the manifest and `latest`, every rank learns the outcome).
//   resume     with Setup.resume, before the first step every rank restores its stage's
//              tensors from the checkpoint (CheckpointSession::Restore, kResume); the steps
//              continue from the checkpoint's step, so the sample indices and random streams
//              are the uninterrupted run's.
//   portions   the program drives the session in collective calls (Train, Evaluate,
//              SaveCheckpoint, Export, Finish). Inside Train, Evaluate and SaveCheckpoint the
//              other ranks follow rank 0's StepCommands until rank 0 broadcasts {pause}: every
//              rank then returns to the program (gpipe-worker's Train runs all the steps; the
//              embedding API's RunSteps a few at a time).
//   stop       a rank asked to stop (WorkerOptions::stop_requested: a signal) says so in its
//              StepReport, or rank 0's on_step callback asks; the decision carries `stop` to
//              every rank, the step completes, a checkpoint is saved (when configured), and rank
//              0 broadcasts StepCommand {pause, interrupted}: Train returns `stopped` on every
//              rank (gpipe-worker then exits 3; it writes --export only when the plan has no
//              checkpoint). A stop seen at an evaluation batch's barrier abandons the evaluation
//              on every rank (rank 0 sends no more batches). A stop that came during start-up is
//              found before the first step: rank 0 broadcasts StepCommand {stop_check} and every
//              rank meets at the gate without running a step; then no step runs.
//   end        after the last step rank 0 broadcasts {pause}. Export: every rank gathers a
//              ParameterShard to rank 0 (kExport), which writes one safetensors file.
//   trace      with runtime.trace, after the setup rank 0 exchanges clock probes with each rank
//              (kClock) and tells it its clock offset; at the end every rank gathers its events
//              to rank 0 (kTrace), which writes the trace, and then tells every rank it is
//              written. After a failure each rank writes its events beside the trace file
//              instead and rank 0 merges the parts it finds. At every step and evaluation-batch
//              boundary each rank appends its new events to a progress file (trace_parts.h):
//              what is left of ranks that mpirun killed, merged by rank 0 or gpipe-run.
//   failure    a rank whose step fails prints the error (rank, stage, step, micro-batch,
//              instruction), notifies every rank (kAbort) and exits non-zero; every wait on the
//              other ranks polls for that notification and ends with "rank R aborted the job:
//              <message>", so all ranks exit non-zero within their wait deadlines, and mpirun's
//              own failure handling covers a rank that dies without a word.
//
// Where each part lives: the start-up and the groups in stage_builder.cc, rank 0's side of each
// step, evaluation and checkpoint decision in coordinator.cc (its barrier: coordinator_gate.cc),
// the checkpoints' exchanges in checkpoint_session.cc, the export in parameter_export.cc, the
// trace in trace_session.cc; the session's lifecycle, the failure handling and the other ranks'
// loop (FollowCommands) here.
#include "runtime/coord/worker.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "layers/registry.h"
#include "runtime/backend/backend_registry.h"
#include "runtime/comm/control_channel.h"
#include "runtime/coord/coordinator.h"
#include "runtime/coord/parameter_export.h"
#include "runtime/coord/stage_builder.h"
#include "runtime/coord/trace_session.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

// After a failure, how long rank 0 waits for the other ranks' parts of the trace, and how long
// the other ranks wait for rank 0 to merge them.
constexpr absl::Duration kTracePartsWait = absl::Milliseconds(1500);
constexpr absl::Duration kTraceMergeWait = absl::Seconds(20);

}  // namespace

class WorkerSession::Impl {
 public:
  Impl(WorkerOptions options, WorkerExtensions extensions, MPI_Comm comm, const Logger& logger)
      : options_(std::move(options)),
        builtin_layers_(extensions.layers == nullptr ? LayerRegistry::WithBuiltins()
                                                     : LayerRegistry()),
        builtin_backends_(extensions.backends == nullptr ? DefaultBackends() : BackendRegistry()),
        layers_(extensions.layers != nullptr ? *extensions.layers : builtin_layers_),
        backends_(extensions.backends != nullptr ? *extensions.backends : builtin_backends_),
        data_sources_(extensions.data_sources),
        comm_(comm),
        logger_(logger) {}

  bool failed() const { return failed_; }
  int rank() const { return rank_; }
  int stage() const { return setup_.stage(); }
  int replica() const { return stage_ != nullptr ? stage_->replica : 0; }
  const pb::Plan& plan() const { return setup_.plan(); }
  int64_t steps_done() const { return stage_ != nullptr ? stage_->steps_done : 0; }
  bool export_requested() const { return setup_.export_parameters(); }

  absl::Status Start() {
    if (started_) return absl::FailedPreconditionError("the session was started already");
    started_ = true;
    auto control = ControlChannel::Create(comm_, nullptr, options_.startup_timeout);
    if (!control.ok()) return Fail(control.status());
    control_ = *std::move(control);
    rank_ = control_->rank();

    absl::StatusOr<ReceivedSetup> received =
        ReceiveSetup(*control_, options_, layers_, data_sources_);
    if (!received.ok()) return Fail(received.status());
    setup_ = std::move(received->setup);
    prediction_ = std::move(received->prediction);
    run_files_ = std::move(received->files);
    checkpoint_lock_ = std::move(received->checkpoint_lock);
    if (setup_.has_error()) {
      // A rejected plan is known to every rank: no abort broadcast, the communicator is intact.
      if (rank_ == 0) {
        logger_.Error(setup_.error());
      } else {
        const std::vector<std::string> lines = absl::StrSplit(setup_.error(), '\n');
        logger_.Error(absl::StrCat("rank 0 rejected the plan: ", lines.front(),
                                   lines.size() > 1 ? " (rank 0 printed all problems)" : ""));
      }
      rejected_ = true;
      return absl::InvalidArgumentError(setup_.error());
    }
    trace_ = TraceSession::Create(setup_, rank_, control_->size());
    stage_ = std::make_unique<RankStage>();
    const StageInputs inputs{.setup = setup_,
                             .control = *control_,
                             .comm = comm_,
                             .backends = backends_,
                             .layers = layers_,
                             .data_sources = data_sources_,
                             .options = options_,
                             .logger = logger_,
                             .trace = trace_.get()};
    if (absl::Status built = BuildStage(inputs, *stage_); !built.ok()) return Fail(built);
    if (rank_ == 0) {
      auto coordinator = Coordinator::Start(*control_, setup_, *stage_, prediction_, options_,
                                            trace_.get(), logger_);
      if (!coordinator.ok()) return Fail(coordinator.status());
      coordinator_ = *std::move(coordinator);
    }
    ready_ = true;
    return absl::OkStatus();
  }

  absl::StatusOr<TrainProgress> Train(int64_t max_steps, const WorkerCallbacks& callbacks) {
    RETURN_IF_ERROR(CheckReady());
    const int64_t steps = plan().training().steps();
    int64_t& done = stage_->steps_done;
    const int64_t last = max_steps < 0 ? steps : std::min(steps, done + max_steps);
    absl::StatusOr<bool> stopped =
        rank_ == 0 ? coordinator_->Train(last, callbacks) : FollowCommands();
    if (!stopped.ok()) return Fail(stopped.status());
    return TrainProgress{.steps_done = done, .finished = done == steps, .stopped = *stopped};
  }

  absl::StatusOr<std::optional<EvalSummary>> Evaluate(const WorkerCallbacks& callbacks) {
    RETURN_IF_ERROR(CheckReady());
    if (stage_->evaluator == nullptr) {
      // Every rank knows the plan: all refuse alike, nothing to announce.
      return absl::FailedPreconditionError(
          "evaluation needs a held-out split and training.eval_every > 0 in the plan");
    }
    if (rank_ != 0) {
      absl::StatusOr<bool> followed = FollowCommands();
      if (!followed.ok()) return Fail(followed.status());
      if (*followed) return absl::CancelledError("evaluation abandoned: stop requested");
      return std::nullopt;
    }
    absl::StatusOr<EvalSummary> eval = coordinator_->Evaluate(callbacks);
    const bool abandoned = absl::IsCancelled(eval.status());
    if (absl::Status paused =
            eval.ok() || abandoned ? coordinator_->Pause(abandoned) : eval.status();
        !paused.ok()) {
      return Fail(paused);
    }
    if (abandoned) return eval.status();
    return std::optional<EvalSummary>(*std::move(eval));
  }

  absl::Status SaveCheckpoint(const WorkerCallbacks& callbacks) {
    RETURN_IF_ERROR(CheckReady());
    if (plan().checkpoint().dir().empty()) {
      return absl::FailedPreconditionError(
          "the plan has no checkpoint.dir to save a checkpoint in");
    }
    if (rank_ != 0) {
      if (absl::StatusOr<bool> followed = FollowCommands(); !followed.ok()) {
        return Fail(followed.status());
      }
      return absl::OkStatus();
    }
    absl::Status saved = coordinator_->SaveCheckpoint(callbacks);
    if (saved.ok()) saved = coordinator_->Pause(false);
    return saved.ok() ? saved : Fail(saved);
  }

  absl::Status Export(const std::string& path, const std::string& note) {
    RETURN_IF_ERROR(CheckReady());
    if (absl::Status settled = SettleParameters(*stage_); !settled.ok()) return Fail(settled);
    absl::Status exported = ExportParameters(
        *control_, *stage_->chunks,
        FileRole{.role = path == options_.export_path ? "--export" : "the export", .path = path},
        run_files_,
        ExportMetadata{.plan_name = plan().name(),
                       .steps = stage_->steps_done,
                       .note = note,
                       .dtype = options_.export_dtype,
                       .shard_bytes = options_.export_shard_bytes},
        stage_->timeout, logger_);
    return exported.ok() ? exported : Fail(exported);
  }

  absl::Status Finish() {
    RETURN_IF_ERROR(CheckReady());
    ready_ = false;
    if (absl::Status settled = SettleParameters(*stage_); !settled.ok()) return Fail(settled);
    if (trace_ == nullptr) return absl::OkStatus();
    if (absl::Status written = trace_->Finish(*control_, absl::Now() + stage_->timeout);
        !written.ok()) {
      return Fail(written);
    }
    // The other ranks wait until rank 0 has written the file: a rank that exits first with a
    // non-zero code (3 after a stop) makes mpirun end the job, rank 0 included.
    pb::StepCommand written;
    if (absl::Status told =
            control_->Broadcast(written, absl::Now() + stage_->timeout, kControlTagStepCommand);
        !told.ok()) {
      return Fail(told);
    }
    if (rank_ == 0) {
      logger_.Info(absl::StrCat("wrote the trace to ", trace_->path()));
      for (absl::string_view line :
           absl::StrSplit(trace_->transfer_overlap(), '\n', absl::SkipEmpty())) {
        logger_.Info(absl::StrCat("transfers of ", line));
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::Status CheckReady() const {
    if (failed_) {
      return absl::FailedPreconditionError(
          "the session failed earlier; end the program without MPI_Finalize (MPI_Abort)");
    }
    if (rejected_) return absl::FailedPreconditionError("the plan was rejected at start-up");
    if (!ready_) {
      return absl::FailedPreconditionError(started_ ? "the session has finished"
                                                    : "the session has not been started");
    }
    return absl::OkStatus();
  }

  // After a failure: report it, tell the other ranks (unless it came from one of them), and
  // mark the session failed (the program must not finalize MPI).
  absl::Status Fail(const absl::Status& status) {
    const bool aborted_elsewhere = status.code() == absl::StatusCode::kAborted;
    if (aborted_elsewhere) {
      logger_.Error(absl::StrCat("stopping: ", status.message()));
    } else {
      logger_.Error(status.message());
    }
    // Rank 0 tells the others first, so that they write their parts of the trace while it
    // waits for them; any other rank writes its part first, before anything that could let
    // mpirun end the job.
    const bool notify = !aborted_elsewhere && control_ != nullptr;
    if (notify && rank_ == 0) control_->NotifyAbort(std::string(status.message()));
    const bool tracing = trace_ != nullptr && !trace_->finished();
    if (tracing) {
      const absl::Status written =
          trace_->FinishAfterFailure(std::string(status.message()), kTracePartsWait);
      if (!written.ok()) {
        logger_.Error(absl::StrCat("the trace was not written: ", written.message()));
      } else if (rank_ == 0) {
        logger_.Info(absl::StrCat("wrote the trace of the failed run to ", trace_->path()));
      }
    }
    if (notify && rank_ != 0) control_->NotifyAbort(std::string(status.message()));
    // mpirun tears the job down as soon as a process exits non-zero. When tracing, a rank other
    // than 0 stays until rank 0 has merged its part (rank 0 may first have to finish a long op
    // before it notices the abort). And the rank that failed first gives the others a moment's
    // grace to see the notification and say why they stop.
    const absl::Time since = absl::Now();
    if (tracing && rank_ != 0) trace_->AwaitMerge(kTraceMergeWait);
    if (notify) absl::SleepFor(absl::Milliseconds(500) - (absl::Now() - since));
    failed_ = true;
    return status;
  }

  // Ranks != 0: follow rank 0's commands until it returns them to the program. Returns whether
  // a stop was asked for.
  absl::StatusOr<bool> FollowCommands() {
    while (true) {
      pb::StepCommand command;
      RETURN_IF_ERROR(
          control_->Broadcast(command, absl::Now() + stage_->timeout, kControlTagStepCommand));
      if (command.pause()) return command.interrupted();
      if (command.stop_check()) {
        pb::StepReport report;
        report.set_rank(rank_);
        report.set_stage(setup_.stage());
        report.set_step(command.step());
        RETURN_IF_ERROR(stage_->gate->Synchronize(report).status());
        continue;
      }
      if (command.checkpoint()) {
        RETURN_IF_ERROR(SettleParameters(*stage_));
        RETURN_IF_ERROR(stage_->checkpoints->Save(command.step(), *stage_->chunks, {}));
        continue;
      }
      if (command.eval() && stage_->evaluator == nullptr) {
        return absl::FailedPreconditionError(
            absl::StrCat("rank ", rank_, " was told to evaluate but has no evaluation program"));
      }
      StageExecutor& executor = command.eval() ? *stage_->evaluator : *stage_->executor;
      RETURN_IF_ERROR(executor.RunStep(command).status());
      if (!command.eval()) stage_->steps_done = command.step() + 1;
      if (trace_ != nullptr) trace_->SaveProgress();
    }
  }

  const WorkerOptions options_;
  const LayerRegistry builtin_layers_;      // used when the program gives none
  const BackendRegistry builtin_backends_;  // likewise
  const LayerRegistry& layers_;
  const BackendRegistry& backends_;
  const DataSourceRegistry* data_sources_;
  MPI_Comm comm_;
  const Logger& logger_;

  bool started_ = false;
  bool ready_ = false;     // Start succeeded and Finish was not called
  bool rejected_ = false;  // rank 0 rejected the plan
  bool failed_ = false;    // a failure was announced (Fail)
  std::unique_ptr<ControlChannel> control_;
  int rank_ = 0;
  pb::Setup setup_;
  schedule::VerifyResult prediction_;         // rank 0 only
  RunFiles run_files_;                        // rank 0 only: checked against a later export
  std::optional<CheckpointDirLock> checkpoint_lock_;  // rank 0 only: checkpoint.dir is this job's
  std::unique_ptr<TraceSession> trace_;       // runtime.trace; null when not traced
  std::unique_ptr<RankStage> stage_;          // BuildStage's, kept whole even after a failed build
  std::unique_ptr<Coordinator> coordinator_;  // rank 0 only
};

WorkerSession::WorkerSession(WorkerOptions options, WorkerExtensions extensions, MPI_Comm comm,
                             const Logger& logger)
    : impl_(std::make_unique<Impl>(std::move(options), extensions, comm, logger)) {}
WorkerSession::~WorkerSession() = default;

absl::Status WorkerSession::Start() { return impl_->Start(); }
absl::StatusOr<TrainProgress> WorkerSession::Train(int64_t max_steps,
                                                   const WorkerCallbacks& callbacks) {
  return impl_->Train(max_steps, callbacks);
}
absl::StatusOr<std::optional<EvalSummary>> WorkerSession::Evaluate(
    const WorkerCallbacks& callbacks) {
  return impl_->Evaluate(callbacks);
}
absl::Status WorkerSession::SaveCheckpoint(const WorkerCallbacks& callbacks) {
  return impl_->SaveCheckpoint(callbacks);
}
absl::Status WorkerSession::Export(const std::string& path, const std::string& note) {
  return impl_->Export(path, note);
}
absl::Status WorkerSession::Finish() { return impl_->Finish(); }
bool WorkerSession::failed() const { return impl_->failed(); }
int WorkerSession::rank() const { return impl_->rank(); }
int WorkerSession::stage() const { return impl_->stage(); }
int WorkerSession::replica() const { return impl_->replica(); }
const pb::Plan& WorkerSession::plan() const { return impl_->plan(); }
int64_t WorkerSession::steps_done() const { return impl_->steps_done(); }
bool WorkerSession::export_requested() const { return impl_->export_requested(); }

absl::Status RunWorker(const WorkerOptions& options, MpiEnvironment& mpi, const Logger& logger) {
  WorkerSession session(options, WorkerExtensions{}, mpi.world(), logger);
  absl::Status status = [&]() -> absl::Status {
    RETURN_IF_ERROR(session.Start());
    ASSIGN_OR_RETURN(const TrainProgress progress, session.Train(-1));
    if (progress.stopped) {
      // Every stop keeps the work: in the checkpoint when the plan has one, else in the export.
      const std::string stopped_at =
          absl::StrCat("step ", progress.steps_done, " of ", session.plan().training().steps());
      // A run stopped during its final evaluation has trained every step: its export is the
      // finished run's, as asked.
      const bool keep_in_export = session.export_requested() &&
                                  (session.plan().checkpoint().dir().empty() || progress.finished);
      if (keep_in_export) {
        RETURN_IF_ERROR(
            session.Export(options.export_path,
                           absl::StrCat("weights after ", stopped_at,
                                        progress.finished ? ": the final evaluation was abandoned"
                                                          : ": the run was stopped")));
      }
      RETURN_IF_ERROR(session.Finish());
      return absl::CancelledError(
          absl::StrCat("stopped after ", stopped_at, " as asked",
                       keep_in_export ? "; the export holds the weights so far" : ""));
    }
    if (session.export_requested()) RETURN_IF_ERROR(session.Export(options.export_path));
    return session.Finish();
  }();
  if (session.failed()) mpi.MarkAborting();
  return status;
}

}  // namespace gpipe

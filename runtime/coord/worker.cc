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
//   each step  rank 0 broadcasts a StepCommand {step, lr, sample indices} (kStepCommand).
//              Every rank runs its stage program, replica r on its share of the indices (the
//              r-th of D equal slices); the buckets' all-reduces start during the backward and
//              end at the program's AllReduceGrads. At the program's OptimizerStep, each rank
//              gathers its StepReport to rank 0 (kStepReport); rank 0 decides apply/skip (skip if
//              any rank saw a non-finite loss or gradient) and broadcasts a StepDecision
//              (kDecision); every rank applies or skips the update alike. Rank 0 prints the
//              progress line and writes the metrics record. Before the update, ranks holding
//              tied parameters (Setup.ties) sum those gradients among themselves.
//   evaluation with training.eval_every, every eval_every steps and after the last, rank 0
//              broadcasts one StepCommand {eval, indices} per batch of the held-out split (its
//              last batch padded with -1). Every rank runs Setup.eval_program (forward only, the
//              same parts) instead of the training program; at its ReportEval the reports meet
//              at the same barrier (the decision is ignored) and rank 0 adds the last stage's
//              sums (loss, samples, correct predictions) into the evaluation line and record.
//   checkpoint with a plan's checkpoint section, after every checkpoint.every_steps steps and
//              when the job is asked to stop, rank 0 empties DIR/step-N and broadcasts
//              StepCommand {checkpoint, step N}; every rank meets in CheckpointSession::Save
//              (kCheckpoint: replica 0's ranks write their shards, rank 0 the manifest and
//              `latest`, every rank learns the outcome).
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
//              rank (gpipe-worker then exits 3, with no export).
//   end        after the last step rank 0 broadcasts {pause}. Export: every rank gathers a
//              ParameterShard to rank 0 (kExport), which writes one safetensors file.
//   trace      with runtime.trace, after the setup rank 0 exchanges clock probes with each rank
//              (kClock) and tells it its clock offset; at the end every rank gathers its events
//              to rank 0 (kTrace), which writes the trace. After a failure each rank writes its
//              events beside the trace file instead and rank 0 merges the parts it finds.
//   failure    a rank whose step fails prints the error (rank, stage, step, micro-batch,
//              instruction), notifies every rank (kAbort) and exits non-zero; every wait on the
//              other ranks polls for that notification and ends with "rank R aborted the job:
//              <message>", so all ranks exit non-zero within their wait deadlines, and mpirun's
//              own failure handling covers a rank that dies without a word.
#include "runtime/coord/worker.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "layers/registry.h"
#include "runtime/backend/backend_registry.h"
#include "runtime/ckpt/safetensors.h"
#include "runtime/comm/control_channel.h"
#include "runtime/comm/mpi_data_channel.h"
#include "runtime/coord/checkpoint_session.h"
#include "runtime/coord/eval_summary.h"
#include "runtime/coord/reduce_groups.h"
#include "runtime/coord/setup_builder.h"
#include "runtime/coord/step_summary.h"
#include "runtime/coord/trace_session.h"
#include "runtime/core/output_path.h"
#include "runtime/core/status_macros.h"
#include "runtime/data/batch_sampler.h"
#include "runtime/data/dataset.h"
#include "runtime/data/open_dataset.h"
#include "runtime/exec/stage_chunks.h"
#include "runtime/exec/stage_executor.h"
#include "runtime/schedule/program.h"
#include "runtime/schedule/rank_layout.h"
#include "runtime/train/metrics_writer.h"
#include "runtime/train/optimizer.h"

namespace gpipe {
namespace {

// After a failure, how long rank 0 waits for the other ranks' parts of the trace, and how long
// the other ranks wait for rank 0 to merge them.
constexpr absl::Duration kTracePartsWait = absl::Milliseconds(1500);
constexpr absl::Duration kTraceMergeWait = absl::Seconds(20);

// Rank 0 side of the gradient-sync barrier also records the step's reports for the summary.
// It also carries stop requests: a rank asked to stop says so in its report, and the decision
// tells every rank that this step is the last.
class CoordinatorGate final : public GradientSyncGate {
 public:
  // `stop_requested`: WorkerOptions::stop_requested (may be null).
  CoordinatorGate(ControlChannel& control, absl::Duration timeout,
                  std::function<bool()> stop_requested)
      : control_(control), timeout_(timeout), stop_requested_(std::move(stop_requested)) {}

  absl::StatusOr<bool> Synchronize(const pb::StepReport& report) override {
    pb::StepReport mine = report;
    if (stop_requested_ != nullptr && stop_requested_()) mine.set_stop_requested(true);
    ASSIGN_OR_RETURN(std::vector<std::string> gathered,
                     control_.GatherToRoot(mine, absl::Now() + timeout_, kControlTagStepReport));
    pb::StepDecision decision;
    if (control_.rank() == 0) {
      reports_.assign(gathered.size(), pb::StepReport());
      bool apply = true;
      bool stop = false;
      for (size_t r = 0; r < gathered.size(); ++r) {
        if (!reports_[r].ParseFromString(gathered[r])) {
          return absl::DataLossError(absl::StrCat("unreadable step report from rank ", r));
        }
        if (reports_[r].non_finite()) apply = false;
        if (reports_[r].stop_requested()) stop = true;
      }
      decision.set_step(report.step());
      decision.set_apply(apply);
      decision.set_stop(stop);
    }
    RETURN_IF_ERROR(control_.Broadcast(decision, absl::Now() + timeout_, kControlTagDecision));
    if (decision.step() != report.step()) {
      return absl::InternalError(absl::StrCat("decision for step ", decision.step(),
                                              " arrived during step ", report.step()));
    }
    applied_ = decision.apply();
    stop_ = decision.stop();
    return decision.apply();
  }

  // Rank 0 only: the reports of the last synchronized step, by rank.
  const std::vector<pb::StepReport>& reports() const { return reports_; }
  bool applied() const { return applied_; }
  // Whether some rank was asked to stop by the last synchronized step.
  bool stop() const { return stop_; }

 private:
  ControlChannel& control_;
  absl::Duration timeout_;
  std::function<bool()> stop_requested_;
  std::vector<pb::StepReport> reports_;
  bool applied_ = true;
  bool stop_ = false;
};

// Rank 0: the warning for a skipped step, naming where the non-finite values were.
std::string SkippedStepWarning(int64_t step, const std::vector<pb::StepReport>& reports,
                               int64_t in_a_row, int64_t limit) {
  std::vector<std::string> where;
  for (const pb::StepReport& r : reports) {
    if (!r.non_finite()) continue;
    where.push_back(absl::StrCat("rank ", r.rank(), " (stage ", r.stage(),
                                 r.replica() > 0 ? absl::StrCat(", replica ", r.replica()) : "",
                                 ")"));
  }
  return absl::StrCat(
      "step ", step, " skipped on every rank: non-finite loss or gradients on ",
      absl::StrJoin(where, ", "), "; ", in_a_row, " in a row",
      limit > 0 ? absl::StrCat(" (the job stops at training.max_skipped_steps: ", limit, ")") : "");
}

Shape ToShape(const google::protobuf::RepeatedField<int64_t>& dims) {
  return Shape(std::vector<int64_t>(dims.begin(), dims.end()));
}

DataRequirements RequirementsOf(const pb::Setup& setup) {
  const pb::Plan& plan = setup.plan();
  DataRequirements req;
  req.input_shape = ToShape(plan.model().input().shape());
  req.target_shape = ToShape(setup.target_shape());
  req.target_dtype = setup.class_targets() ? DType::kI64 : DType::kF32;
  req.num_classes = setup.num_classes();
  req.seed = plan.training().seed();
  req.input_dtype = plan.model().input().type() == pb::INT64 ? DType::kI64 : DType::kF32;
  return req;
}

// Class ids per sample: 1, or the positions of a sequence target ([T] for a language model).
int64_t PredictionsPerSample(const pb::Setup& setup) {
  int64_t n = 1;
  for (int64_t d : setup.target_shape()) n *= d;
  return n;
}

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
  int replica() const { return replica_; }
  const pb::Plan& plan() const { return setup_.plan(); }
  int64_t steps_done() const { return done_; }
  bool export_requested() const { return setup_.export_parameters(); }

  absl::Status Start() {
    if (started_) return absl::FailedPreconditionError("the session was started already");
    started_ = true;
    auto control = ControlChannel::Create(comm_, nullptr, options_.startup_timeout);
    if (!control.ok()) return Fail(control.status());
    control_ = *std::move(control);
    rank_ = control_->rank();

    if (absl::Status setup = ReceiveSetup(); !setup.ok()) return Fail(setup);
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
    if (absl::Status built = BuildStage(); !built.ok()) return Fail(built);
    ready_ = true;
    return absl::OkStatus();
  }

  absl::StatusOr<TrainProgress> Train(int64_t max_steps, const WorkerCallbacks& callbacks) {
    RETURN_IF_ERROR(CheckReady());
    const int64_t steps = plan().training().steps();
    const int64_t last = max_steps < 0 ? steps : std::min(steps, done_ + max_steps);
    absl::StatusOr<bool> stopped =
        rank_ == 0 ? CoordinateTraining(last, callbacks) : FollowCommands();
    if (!stopped.ok()) return Fail(stopped.status());
    return TrainProgress{.steps_done = done_, .finished = done_ == steps, .stopped = *stopped};
  }

  absl::StatusOr<std::optional<EvalSummary>> Evaluate(const WorkerCallbacks& callbacks) {
    RETURN_IF_ERROR(CheckReady());
    if (evaluator_ == nullptr) {
      // Every rank knows the plan: all refuse alike, nothing to announce.
      return absl::FailedPreconditionError(
          "evaluation needs a held-out split and training.eval_every > 0 in the plan");
    }
    if (rank_ != 0) {
      if (absl::StatusOr<bool> followed = FollowCommands(); !followed.ok()) {
        return Fail(followed.status());
      }
      return std::nullopt;
    }
    absl::StatusOr<EvalSummary> eval = Evaluate(done_);
    if (eval.ok()) eval = Report(*std::move(eval), callbacks);
    if (absl::Status paused = eval.ok() ? Pause(false) : eval.status(); !paused.ok()) {
      return Fail(paused);
    }
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
    absl::Status saved = SaveCheckpointAfter(done_, callbacks);
    if (saved.ok()) saved = Pause(false);
    return saved.ok() ? saved : Fail(saved);
  }

  absl::Status Export(const std::string& path) {
    RETURN_IF_ERROR(CheckReady());
    absl::Status exported = ExportParameters(path);
    return exported.ok() ? exported : Fail(exported);
  }

  absl::Status Finish() {
    RETURN_IF_ERROR(CheckReady());
    ready_ = false;
    if (trace_ == nullptr) return absl::OkStatus();
    if (absl::Status written = trace_->Finish(*control_, absl::Now() + timeout_); !written.ok()) {
      return Fail(written);
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

  // Rank 0 resolves the job and sends every rank its Setup (an error Setup when the plan is
  // rejected); other ranks receive theirs. Errors returned here are transport failures.
  absl::Status ReceiveSetup() {
    const absl::Time deadline = absl::Now() + options_.startup_timeout;
    if (rank_ != 0) return control_->Recv(0, kControlTagSetup, setup_, deadline);
    auto job = ResolveJob(options_, control_->size(), layers_, data_sources_);
    std::vector<pb::Setup> setups(control_->size());
    if (job.ok()) {
      setups = job->setups;
      prediction_ = job->prediction;
      if (!options_.trace.empty()) {
        for (pb::Setup& s : setups) s.mutable_plan()->mutable_runtime()->set_trace(options_.trace);
      }
      TraceSession::RemoveStaleParts(setups[0].plan().runtime().trace(), control_->size());
    } else {
      for (pb::Setup& s : setups) s.set_error(std::string(job.status().message()));
    }
    for (int r = 1; r < control_->size(); ++r) {
      RETURN_IF_ERROR(control_->Send(r, kControlTagSetup, setups[r], deadline));
    }
    setup_ = std::move(setups[0]);
    return absl::OkStatus();
  }

  // Everything this rank's stage needs, once: backend, parameters, data, channel, executors.
  absl::Status BuildStage() {
    const pb::Plan& plan = setup_.plan();
    ASSIGN_OR_RETURN(const schedule::RankLayout layout,
                     schedule::RankLayout::FromProto(setup_.layout()));
    const int stages = plan.pipeline().stages();
    if (layout.world_size() != control_->size() || layout.stages() != stages ||
        layout.StageOf(rank_) != setup_.stage()) {
      return absl::InternalError(
          absl::StrCat("rank ", rank_, " received an inconsistent rank layout (", layout.replicas(),
                       " x ", layout.stages(), " for ", control_->size(), " ranks, stage ",
                       setup_.stage(), "); a gpipe bug, please report it"));
    }
    const int stage = layout.StageOf(rank_);
    replica_ = layout.ReplicaOf(rank_);
    const int chunks = plan.pipeline().virtual_stages();
    timeout_ = absl::Seconds(plan.runtime().timeouts().wait_seconds());

    ASSIGN_OR_RETURN(backend_, backends_.Create(plan.runtime(),
                                                BackendContext{.world = comm_,
                                                               .logger = &logger_,
                                                               .cuda_visible_devices =
                                                                   options_.cuda_visible_devices}));
    Device& device = backend_->device();
    RETURN_IF_ERROR(backend_->CheckSetup(setup_));
    const std::vector<ChunkSpec> specs =
        StageChunks::SpecsForStage({setup_.stages().begin(), setup_.stages().end()}, stage, stages);
    if (static_cast<int>(specs.size()) != chunks) {
      return absl::InternalError(absl::StrCat("the stage table has ", setup_.stages_size(),
                                              " parts, not ", stages, " stages x ", chunks,
                                              " chunks"));
    }
    const std::vector<pb::TieGroup> ties(setup_.ties().begin(), setup_.ties().end());
    ASSIGN_OR_RETURN(
        StageChunks parts,
        StageChunks::Create(device, plan, specs, layers_.ForDevice(plan.runtime().device()), ties,
                            backend_->ChunkAdapterFor(plan)));
    parts_ = std::make_unique<StageChunks>(std::move(parts));
    if (setup_.has_init_from()) {
      ASSIGN_OR_RETURN(std::vector<NamedTensorData> initial, ReadSafetensors(setup_.init_from()));
      RETURN_IF_ERROR(
          WithContext(parts_->Import(initial), absl::StrCat("--init-from ", setup_.init_from())));
    }

    const bool evaluates = setup_.has_eval_program();
    if (stage == 0 || stage == stages - 1) {
      DataRequirements requirements = RequirementsOf(setup_);
      requirements.keep_inputs = stage == 0;
      requirements.keep_targets = stage == stages - 1;
      ASSIGN_OR_RETURN(dataset_,
                       OpenDataset(plan.data(), requirements, DataSplit::kTrain, data_sources_));
      if (evaluates) {
        ASSIGN_OR_RETURN(eval_dataset_,
                         OpenDataset(plan.data(), requirements, DataSplit::kEval, data_sources_));
      }
    }
    dataset_ = backend_->AdaptDataset(std::move(dataset_));
    eval_dataset_ = backend_->AdaptDataset(std::move(eval_dataset_));
    checkpoints_ = std::make_unique<CheckpointSession>(*control_, setup_, timeout_, logger_);
    if (setup_.has_resume()) {
      RETURN_IF_ERROR(checkpoints_->Restore(*parts_, dataset_ != nullptr ? dataset_->size() : 0));
      done_ = setup_.resume().manifest().step();
    }

    ASSIGN_OR_RETURN(channel_,
                     backend_->CreateChannel(
                         plan, comm_, [this] { return control_->PollAbort(); }, timeout_));
    ASSIGN_OR_RETURN(schedule::StageProgram program, schedule::FromProto(setup_.program()));

    ExecutorConfig config;
    config.rank = rank_;
    config.stage = stage;
    config.num_stages = stages;
    config.chunks = chunks;
    config.micro_batches = plan.pipeline().micro_batches();
    config.global_batch = plan.training().global_batch();
    config.replica = layout.ReplicaOf(rank_);
    config.replicas = layout.replicas();
    config.remat = plan.pipeline().remat();
    config.seed = plan.training().seed();
    // With several chunks the pipeline wraps around.
    const bool wraps = chunks > 1;
    config.prev_rank = layout.PrevRank(rank_, wraps);
    config.next_rank = layout.NextRank(rank_, wraps);
    config.replica_group = layout.ReplicaGroup(stage);
    config.wait_timeout = timeout_;
    config.ties = ties;
    config.boundary_dtype = plan.training().precision() == pb::BF16 ? DType::kBF16 : DType::kF32;
    gate_ = std::make_unique<CoordinatorGate>(*control_, timeout_, options_.stop_requested);
    TraceRecorder* recorder = trace_ != nullptr ? trace_->recorder() : nullptr;
    ExecutorResources resources{device,    parts_->refs(), dataset_.get(),
                                *channel_, *gate_,         recorder};
    // The stage's replica group (with its gradient buckets) and tie groups, made here, once.
    ASSIGN_OR_RETURN(
        StageReduceGroups reduce_groups,
        StageReduceGroups::Make(*channel_, *parts_, rank_, config.replica_group, ties,
                                plan.runtime().gradient_bucket_bytes(), absl::Now() + timeout_));
    reduce_groups_ = std::make_unique<StageReduceGroups>(std::move(reduce_groups));
    reduce_groups_->AttachTo(resources);
    executor_ = std::make_unique<StageExecutor>(config, std::move(program), resources);
    // The forward-only program that evaluates the held-out split with the same parts.
    if (evaluates) {
      ASSIGN_OR_RETURN(schedule::StageProgram eval_program,
                       schedule::FromProto(setup_.eval_program()));
      evaluator_ = std::make_unique<StageExecutor>(
          config, std::move(eval_program),
          ExecutorResources{device, parts_->refs(), eval_dataset_.get(), *channel_, *gate_,
                            recorder});
    }
    if (trace_ != nullptr) {
      RETURN_IF_ERROR(WithContext(trace_->AlignClocks(*control_, absl::Now() + timeout_),
                                  "aligning the ranks' clocks for the trace"));
    }
    if (rank_ == 0) RETURN_IF_ERROR(StartCoordinating());
    return absl::OkStatus();
  }

  // Rank 0, once: the sampler, the metrics file and the start-up line.
  absl::Status StartCoordinating() {
    const pb::Plan& plan = setup_.plan();
    sampler_ = std::make_unique<BatchSampler>(dataset_->size(), plan.training().global_batch(),
                                              plan.data().shuffle(), plan.training().seed());
    const pb::CheckpointManifest* resumed =
        setup_.has_resume() ? &setup_.resume().manifest() : nullptr;
    progress_ =
        CheckpointProgress{.applied_steps = resumed != nullptr ? resumed->applied_steps() : 0,
                           .skipped_in_a_row = resumed != nullptr ? resumed->skipped_in_a_row() : 0,
                           .dataset_size = dataset_->size()};
    const std::string metrics_path =
        !options_.metrics_out.empty() ? options_.metrics_out : plan.runtime().metrics_out();
    if (!metrics_path.empty()) {
      ASSIGN_OR_RETURN(metrics_, MetricsWriter::Open(metrics_path, /*append=*/resumed != nullptr));
    }
    const int replicas = plan.pipeline().data_parallel();
    logger_.Info(absl::StrCat(
        "plan '", plan.name(),
        "': ", replicas > 1 ? absl::StrCat(replicas, " replicas x ") : std::string(),
        plan.pipeline().stages(), " stages x ", plan.pipeline().micro_batches(), " micro-batches, ",
        pb::Schedule_Name(plan.pipeline().schedule()), ", remat ",
        pb::Remat_Name(plan.pipeline().remat()), ", batch ", plan.training().global_batch(), ", ",
        plan.training().steps(), " steps",
        resumed != nullptr ? absl::StrCat(" (resuming after step ", done_, ")") : std::string(),
        "; predicted bubble ", absl::StrFormat("%.1f%%", 100.0 * prediction_.bubble_fraction)));
    return absl::OkStatus();
  }

  // Rank 0: tells the other ranks to return to the program (FollowCommands).
  absl::Status Pause(bool interrupted) {
    pb::StepCommand pause;
    pause.set_pause(true);
    pause.set_interrupted(interrupted);
    return control_->Broadcast(pause, absl::Now() + timeout_, kControlTagStepCommand);
  }

  // Rank 0: drive the steps up to `last`, and the evaluations every eval_every steps and after
  // the last, and the checkpoints every checkpoint.every_steps and when asked to stop; then
  // return the other ranks to the program. Returns whether a stop was asked for.
  absl::StatusOr<bool> CoordinateTraining(int64_t last, const WorkerCallbacks& callbacks) {
    const pb::Plan& plan = setup_.plan();
    const int64_t steps = plan.training().steps();
    const int64_t batch = plan.training().global_batch();
    const int log_every = plan.runtime().log_every();
    const int64_t max_skipped = plan.training().max_skipped_steps();
    // The resolved plan always has a checkpoint section (defaults made explicit); a dir means one.
    const bool checkpoints = !plan.checkpoint().dir().empty();
    const int64_t checkpoint_every = plan.checkpoint().every_steps();
    const double base_lr = parts_->optimizer(0).base_lr();
    bool stop = false;
    while (done_ < last && !stop) {
      const int64_t step = done_;
      const absl::Time begin = absl::Now();
      pb::StepCommand command;
      command.set_step(step);
      command.set_lr(base_lr);
      for (int64_t index : sampler_->IndicesForStep(step)) command.add_sample_indices(index);
      RETURN_IF_ERROR(control_->Broadcast(command, absl::Now() + timeout_, kControlTagStepCommand));
      RETURN_IF_ERROR(executor_->RunStep(command).status());
      const double step_ms = absl::ToDoubleMilliseconds(absl::Now() - begin);
      ASSIGN_OR_RETURN(StepSummary summary,
                       Summarize(step, gate_->reports(), batch, step_ms, gate_->applied(),
                                 PredictionsPerSample(setup_)));
      if (metrics_) RETURN_IF_ERROR(metrics_->Write(ToMetricsRecord(summary)));
      if (log_every > 0 && ((step + 1) % log_every == 0 || step + 1 == steps || !summary.applied)) {
        logger_.Info(FormatProgressLine(summary, steps));
      }
      done_ = step + 1;
      if (summary.applied) {
        ++progress_.applied_steps;
        progress_.skipped_in_a_row = 0;
      } else {
        ++progress_.skipped_in_a_row;
        logger_.Warning(
            SkippedStepWarning(step, gate_->reports(), progress_.skipped_in_a_row, max_skipped));
        if (max_skipped > 0 && progress_.skipped_in_a_row >= max_skipped) {
          return absl::FailedPreconditionError(
              absl::StrCat("stopping: the last ", progress_.skipped_in_a_row,
                           " steps were all skipped for non-finite losses or gradients "
                           "(training.max_skipped_steps: ",
                           max_skipped, "); lower the learning rate or check the data"));
        }
      }
      const bool asked = callbacks.on_step != nullptr && callbacks.on_step(summary);
      // A stop asked for during the last step changes nothing.
      stop = (gate_->stop() || asked) && done_ < steps;
      const int64_t eval_every = plan.training().eval_every();
      if (!stop && evaluator_ != nullptr && (done_ % eval_every == 0 || done_ == steps)) {
        ASSIGN_OR_RETURN(EvalSummary eval, Evaluate(done_));
        RETURN_IF_ERROR(Report(std::move(eval), callbacks).status());
      }
      if (checkpoints && (stop || (checkpoint_every > 0 && done_ % checkpoint_every == 0))) {
        RETURN_IF_ERROR(SaveCheckpointAfter(done_, callbacks));
      }
      if (stop) {
        logger_.Warning(absl::StrCat(
            "stopping after step ", done_, " of ", steps, " as asked",
            asked ? " (by the program)" : " (a signal)",
            checkpoints ? absl::StrCat("; continue with --resume latest (checkpoint.dir ",
                                       plan.checkpoint().dir(), ")")
                        : "; the plan has no checkpoint, so this run's progress is not saved"));
      }
    }
    if (done_ == steps && progress_.applied_steps == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "no step applied an update: all ", done_,
          " steps were skipped for non-finite losses or gradients (check the initial weights, the "
          "data and the learning rate); nothing is exported"));
    }
    RETURN_IF_ERROR(Pause(stop));
    return stop;
  }

  // Rank 0: logs an evaluation, writes its metrics record and calls on_eval.
  absl::StatusOr<EvalSummary> Report(EvalSummary eval, const WorkerCallbacks& callbacks) {
    logger_.Info(eval.FormatLine());
    if (metrics_) RETURN_IF_ERROR(metrics_->Write(eval.ToMetricsRecord()));
    if (callbacks.on_eval != nullptr) callbacks.on_eval(eval);
    return eval;
  }

  // Rank 0: a checkpoint after `done` steps, through every rank.
  absl::Status SaveCheckpointAfter(int64_t done, const WorkerCallbacks& callbacks) {
    RETURN_IF_ERROR(checkpoints_->Prepare(done));
    pb::StepCommand command;
    command.set_step(done);
    command.set_checkpoint(true);
    RETURN_IF_ERROR(control_->Broadcast(command, absl::Now() + timeout_, kControlTagStepCommand));
    RETURN_IF_ERROR(checkpoints_->Save(done, *parts_, progress_));
    if (callbacks.on_checkpoint != nullptr) {
      callbacks.on_checkpoint(done, checkpoints_->CheckpointPath(done));
    }
    return absl::OkStatus();
  }

  // Rank 0: one pass of the forward-only program over the held-out split (its first
  // training.eval_samples samples, or all), in batches of global_batch; the last batch is padded
  // with index -1, which counts nowhere. `after_step` training steps are done.
  absl::StatusOr<EvalSummary> Evaluate(int64_t after_step) {
    const pb::Plan& plan = setup_.plan();
    const absl::Time begin = absl::Now();
    const int64_t batch = plan.training().global_batch();
    int64_t samples = eval_dataset_->size();
    if (plan.training().eval_samples() > 0) {
      samples = std::min(samples, plan.training().eval_samples());
    }
    EvalSummary summary(after_step, plan.data().has_text());
    for (int64_t first = 0; first < samples; first += batch) {
      pb::StepCommand command;
      command.set_step(after_step);
      command.set_eval(true);
      for (int64_t i = first; i < first + batch; ++i) {
        command.add_sample_indices(i < samples ? i : -1);
      }
      RETURN_IF_ERROR(control_->Broadcast(command, absl::Now() + timeout_, kControlTagStepCommand));
      RETURN_IF_ERROR(evaluator_->RunStep(command).status());
      RETURN_IF_ERROR(summary.Add(gate_->reports()));
    }
    summary.set_elapsed_ms(absl::ToDoubleMilliseconds(absl::Now() - begin));
    return summary;
  }

  // Ranks != 0: follow rank 0's commands until it returns them to the program. Returns whether
  // a stop was asked for.
  absl::StatusOr<bool> FollowCommands() {
    while (true) {
      pb::StepCommand command;
      RETURN_IF_ERROR(control_->Broadcast(command, absl::Now() + timeout_, kControlTagStepCommand));
      if (command.pause()) return command.interrupted();
      if (command.checkpoint()) {
        RETURN_IF_ERROR(checkpoints_->Save(command.step(), *parts_, {}));
        continue;
      }
      if (command.eval() && evaluator_ == nullptr) {
        return absl::FailedPreconditionError(
            absl::StrCat("rank ", rank_, " was told to evaluate but has no evaluation program"));
      }
      StageExecutor& executor = command.eval() ? *evaluator_ : *executor_;
      RETURN_IF_ERROR(executor.RunStep(command).status());
      if (!command.eval()) done_ = command.step() + 1;
    }
  }

  absl::Status ExportParameters(const std::string& path) {
    // Rank 0 checks the destination first and every rank learns the verdict, so no rank gathers
    // for a file that cannot be written.
    pb::ExportResult checked;
    if (rank_ == 0) {
      if (absl::Status ok = CheckOutputFile("export", path); !ok.ok()) {
        checked.set_error(std::string(ok.message()));
      }
    }
    RETURN_IF_ERROR(control_->Broadcast(checked, absl::Now() + timeout_, kControlTagExport));
    if (checked.has_error()) return absl::InvalidArgumentError(checked.error());
    pb::ParameterShard shard;
    shard.set_rank(rank_);
    // A rank that cannot read its parameters still takes part in the gather, carrying its
    // error, so no rank waits for it.
    const absl::StatusOr<std::vector<NamedTensorData>> exported = parts_->Export();
    if (!exported.ok()) shard.set_error(std::string(exported.status().message()));
    const std::vector<NamedTensorData> none;
    for (const NamedTensorData& t : exported.ok() ? *exported : none) {
      pb::NamedTensor* named = shard.add_tensors();
      named->set_name(t.name);
      for (int64_t d : t.shape) named->add_shape(d);
      named->set_f32_data(std::string(reinterpret_cast<const char*>(t.values.data()),
                                      t.values.size() * sizeof(float)));
    }
    ASSIGN_OR_RETURN(std::vector<std::string> gathered,
                     control_->GatherToRoot(shard, absl::Now() + timeout_, kControlTagExport));
    // Every rank learns whether rank 0 wrote the file, so none exits 0 after a failed export.
    pb::ExportResult result;
    if (rank_ == 0) {
      const absl::Status written = WriteExport(path, gathered);
      if (!written.ok()) result.set_error(std::string(written.message()));
    }
    RETURN_IF_ERROR(control_->Broadcast(result, absl::Now() + timeout_, kControlTagExport));
    if (result.has_error()) {
      return absl::InternalError(
          absl::StrCat("exporting parameters failed on rank 0: ", result.error()));
    }
    return absl::OkStatus();
  }

  // Rank 0: merges every rank's shard and writes one safetensors file. With data parallelism
  // each parameter arrives once per replica: replica 0's is written, and every other copy must
  // equal it bit for bit (the replicas apply the same update to the same values), else the
  // export fails naming the first difference.
  absl::Status WriteExport(const std::string& path, const std::vector<std::string>& gathered) {
    std::vector<NamedTensorData> all;
    std::map<std::string, size_t> index;  // name -> position in `all`
    for (size_t r = 0; r < gathered.size(); ++r) {
      pb::ParameterShard received;
      if (!received.ParseFromString(gathered[r])) {
        return absl::DataLossError(absl::StrCat("unreadable parameters from rank ", r));
      }
      if (received.has_error()) {
        return absl::FailedPreconditionError(
            absl::StrCat("rank ", r, " could not read its parameters: ", received.error()));
      }
      for (const pb::NamedTensor& named : received.tensors()) {
        NamedTensorData t{named.name(), {named.shape().begin(), named.shape().end()}, {}};
        t.values.resize(named.f32_data().size() / sizeof(float));
        std::memcpy(t.values.data(), named.f32_data().data(), t.values.size() * sizeof(float));
        if (const auto it = index.find(t.name); it != index.end()) {
          RETURN_IF_ERROR(CheckReplicaCopy(all[it->second], t, static_cast<int>(r)));
          continue;
        }
        index.emplace(t.name, all.size());
        all.push_back(std::move(t));
      }
    }
    const pb::Plan& plan = setup_.plan();
    std::map<std::string, std::string> metadata = {
        {"format", "pt"}, {"gpipe_plan", plan.name()}, {"gpipe_steps", absl::StrCat(done_)}};
    RETURN_IF_ERROR(WriteSafetensors(path, all, metadata).status());
    logger_.Info(absl::StrCat("exported ", all.size(), " parameters to ", path));
    return absl::OkStatus();
  }

  // A data-parallel replica's copy of a parameter (from `rank`) against replica 0's.
  static absl::Status CheckReplicaCopy(const NamedTensorData& first, const NamedTensorData& copy,
                                       int rank) {
    if (copy.shape != first.shape) {
      return absl::InternalError(absl::StrCat("rank ", rank, " exported '", copy.name,
                                              "' with another shape than replica 0"));
    }
    for (size_t i = 0; i < copy.values.size(); ++i) {
      // Bitwise, so that NaNs compare too.
      if (std::memcmp(&copy.values[i], &first.values[i], sizeof(float)) != 0) {
        return absl::InternalError(
            absl::StrCat("the data-parallel replicas diverged: rank ", rank, " holds ", copy.name,
                         "[", i, "] = ", copy.values[i], ", replica 0 holds ", first.values[i],
                         "; a gpipe bug, please report it"));
      }
    }
    return absl::OkStatus();
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
  int replica_ = 0;
  pb::Setup setup_;
  schedule::VerifyResult prediction_;
  absl::Duration timeout_ = absl::Seconds(300);
  std::unique_ptr<TraceSession> trace_;  // runtime.trace; null when not traced

  // The stage (BuildStage), in dependency order: later members refer to earlier ones.
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<StageChunks> parts_;
  std::unique_ptr<Dataset> dataset_;       // first and last stages only
  std::unique_ptr<Dataset> eval_dataset_;  // likewise, with an evaluation program
  std::unique_ptr<CheckpointSession> checkpoints_;
  std::unique_ptr<DataChannel> channel_;
  std::unique_ptr<CoordinatorGate> gate_;
  std::unique_ptr<StageReduceGroups> reduce_groups_;
  std::unique_ptr<StageExecutor> executor_;
  std::unique_ptr<StageExecutor> evaluator_;  // null without training.eval_every
  int64_t done_ = 0;                          // training steps completed

  // Rank 0's coordination state.
  std::unique_ptr<BatchSampler> sampler_;
  std::unique_ptr<MetricsWriter> metrics_;
  CheckpointProgress progress_;
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
absl::Status WorkerSession::Export(const std::string& path) { return impl_->Export(path); }
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
      RETURN_IF_ERROR(session.Finish());
      return absl::CancelledError(absl::StrCat("stopped after step ", progress.steps_done, " of ",
                                               session.plan().training().steps(),
                                               " as asked; no export is written"));
    }
    if (session.export_requested()) RETURN_IF_ERROR(session.Export(options.export_path));
    return session.Finish();
  }();
  if (session.failed()) mpi.MarkAborting();
  return status;
}

}  // namespace gpipe

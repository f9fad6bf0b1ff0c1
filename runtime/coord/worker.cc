// The step protocol between rank 0 (coordinator, also stage 0's worker) and every rank.
//
//   start-up   rank 0: load + validate the plan, infer shapes, partition, build and verify the
//              schedule (ResolveJob). It sends each rank r a Setup (tag kSetup): either
//              {error} — every rank then exits non-zero with that message and MPI finalizes
//              normally — or {resolved plan, stage table, rank r's stage and program, init/export
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
//   stop       a rank asked to stop (WorkerOptions::stop_requested: a signal) says so in its
//              StepReport; the decision carries `stop` to every rank, the step completes, a
//              checkpoint is saved (when configured), and rank 0 broadcasts StepCommand {stop,
//              interrupted}: every rank returns CANCELLED (gpipe-worker's exit code 3), with
//              no export.
//   end        rank 0 broadcasts StepCommand {stop}. If export was asked for, every rank gathers
//              a ParameterShard to rank 0 (kExport), which writes one safetensors file.
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
#include "runtime/core/status_macros.h"
#include "runtime/exec/stage_chunks.h"
#include "runtime/exec/stage_executor.h"
#include "runtime/schedule/program.h"
#include "runtime/schedule/rank_layout.h"
#include "runtime/train/dataset.h"
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

class Worker {
 public:
  Worker(const WorkerOptions& options, MpiEnvironment& mpi, const Logger& logger)
      : options_(options), mpi_(mpi), logger_(logger) {}

  absl::Status Run() {
    auto control = ControlChannel::Create(mpi_.world(), nullptr, options_.startup_timeout);
    if (!control.ok()) return Fail(control.status());
    control_ = *std::move(control);
    rank_ = control_->rank();

    if (absl::Status setup = ReceiveSetup(); !setup.ok()) return Fail(setup);
    if (setup_.has_error()) {
      // A rejected plan is known to every rank: no abort broadcast, MPI finalizes normally.
      if (rank_ == 0) {
        logger_.Error(setup_.error());
      } else {
        const std::vector<std::string> lines = absl::StrSplit(setup_.error(), '\n');
        logger_.Error(absl::StrCat("rank 0 rejected the plan: ", lines.front(),
                                   lines.size() > 1 ? " (rank 0 printed all problems)" : ""));
      }
      return absl::InvalidArgumentError(setup_.error());
    }
    trace_ = TraceSession::Create(setup_, rank_, control_->size());
    absl::Status status = Train();
    // A stop asked for by a signal ends every rank alike, cleanly: not a failure to announce.
    if (absl::IsCancelled(status)) return status;
    if (!status.ok()) return Fail(status);
    return absl::OkStatus();
  }

 private:
  // After a failure: report it, tell the other ranks (unless it came from one of them), and
  // mark MPI as aborting so the process exits without MPI_Finalize.
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
    mpi_.MarkAborting();
    return status;
  }

  // Rank 0 resolves the job and sends every rank its Setup (an error Setup when the plan is
  // rejected); other ranks receive theirs. Errors returned here are transport failures.
  absl::Status ReceiveSetup() {
    const absl::Time deadline = absl::Now() + options_.startup_timeout;
    if (rank_ != 0) return control_->Recv(0, kControlTagSetup, setup_, deadline);
    auto job = ResolveJob(options_, control_->size(), registry_);
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

  absl::Status Train() {
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
    const int chunks = plan.pipeline().virtual_stages();
    timeout_ = absl::Seconds(plan.runtime().timeouts().wait_seconds());

    ASSIGN_OR_RETURN(
        std::unique_ptr<Backend> backend,
        backends_.Create(plan.runtime(),
                         BackendContext{.world = mpi_.world(),
                                        .logger = &logger_,
                                        .cuda_visible_devices = options_.cuda_visible_devices}));
    Device& device = backend->device();
    RETURN_IF_ERROR(backend->CheckSetup(setup_));
    const std::vector<ChunkSpec> specs =
        StageChunks::SpecsForStage({setup_.stages().begin(), setup_.stages().end()}, stage, stages);
    if (static_cast<int>(specs.size()) != chunks) {
      return absl::InternalError(absl::StrCat("the stage table has ", setup_.stages_size(),
                                              " parts, not ", stages, " stages x ", chunks,
                                              " chunks"));
    }
    const std::vector<pb::TieGroup> ties(setup_.ties().begin(), setup_.ties().end());
    ASSIGN_OR_RETURN(StageChunks parts, StageChunks::Create(device, plan, specs, registry_, ties,
                                                            backend->ChunkAdapterFor(plan)));
    if (setup_.has_init_from()) {
      ASSIGN_OR_RETURN(std::vector<NamedTensorData> initial, ReadSafetensors(setup_.init_from()));
      RETURN_IF_ERROR(
          WithContext(parts.Import(initial), absl::StrCat("--init-from ", setup_.init_from())));
    }

    std::unique_ptr<Dataset> dataset;
    std::unique_ptr<Dataset> eval_dataset;
    const bool evaluates = setup_.has_eval_program();
    if (stage == 0 || stage == stages - 1) {
      DataRequirements requirements = RequirementsOf(setup_);
      requirements.keep_inputs = stage == 0;
      requirements.keep_targets = stage == stages - 1;
      ASSIGN_OR_RETURN(dataset, OpenDataset(plan.data(), requirements));
      if (evaluates) {
        ASSIGN_OR_RETURN(eval_dataset, OpenDataset(plan.data(), requirements, DataSplit::kEval));
      }
    }
    dataset = backend->AdaptDataset(std::move(dataset));
    eval_dataset = backend->AdaptDataset(std::move(eval_dataset));
    CheckpointSession checkpoints(*control_, setup_, timeout_, logger_);
    if (setup_.has_resume()) {
      RETURN_IF_ERROR(checkpoints.Restore(parts, dataset != nullptr ? dataset->size() : 0));
    }

    ASSIGN_OR_RETURN(auto channel,
                     backend->CreateChannel(
                         plan, mpi_.world(), [this] { return control_->PollAbort(); }, timeout_));
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
    CoordinatorGate gate(*control_, timeout_, options_.stop_requested);
    TraceRecorder* recorder = trace_ != nullptr ? trace_->recorder() : nullptr;
    ExecutorResources resources{device, parts.refs(), dataset.get(), *channel, gate, recorder};
    // The stage's replica group (with its gradient buckets) and tie groups, made here, once.
    ASSIGN_OR_RETURN(
        StageReduceGroups reduce_groups,
        StageReduceGroups::Make(*channel, parts, rank_, config.replica_group, ties,
                                plan.runtime().gradient_bucket_bytes(), absl::Now() + timeout_));
    reduce_groups.AttachTo(resources);
    StageExecutor executor(config, std::move(program), resources);
    // The forward-only program that evaluates the held-out split with the same parts.
    std::unique_ptr<StageExecutor> evaluator;
    if (evaluates) {
      ASSIGN_OR_RETURN(schedule::StageProgram eval_program,
                       schedule::FromProto(setup_.eval_program()));
      evaluator = std::make_unique<StageExecutor>(
          config, std::move(eval_program),
          ExecutorResources{device, parts.refs(), eval_dataset.get(), *channel, gate, recorder});
    }
    Executors executors{executor, evaluator.get(), parts, checkpoints};
    if (trace_ != nullptr) {
      RETURN_IF_ERROR(WithContext(trace_->AlignClocks(*control_, absl::Now() + timeout_),
                                  "aligning the ranks' clocks for the trace"));
    }

    absl::StatusOr<int64_t> stopped_after =
        rank_ == 0 ? Coordinate(plan, *dataset, eval_dataset.get(), parts.optimizer(0).base_lr(),
                                executors, gate)
                   : Follow(executors);
    RETURN_IF_ERROR(stopped_after.status());
    const bool interrupted = *stopped_after < plan.training().steps();
    if (setup_.export_parameters() && !interrupted) RETURN_IF_ERROR(ExportParameters(plan, parts));
    if (trace_ != nullptr) {
      RETURN_IF_ERROR(trace_->Finish(*control_, absl::Now() + timeout_));
      if (rank_ == 0) {
        logger_.Info(absl::StrCat("wrote the trace to ", trace_->path()));
        for (absl::string_view line :
             absl::StrSplit(trace_->transfer_overlap(), '\n', absl::SkipEmpty())) {
          logger_.Info(absl::StrCat("transfers of ", line));
        }
      }
    }
    if (interrupted) {
      return absl::CancelledError(absl::StrCat("stopped after step ", *stopped_after, " of ",
                                               plan.training().steps(), " as asked"));
    }
    return absl::OkStatus();
  }

  struct Executors {
    StageExecutor& train;
    StageExecutor* eval;  // null without training.eval_every
    StageChunks& parts;
    CheckpointSession& checkpoints;
  };

  // Rank 0: drive the steps, and the evaluations every eval_every steps and after the last, and
  // the checkpoints every checkpoint.every_steps and when asked to stop. Returns the steps done
  // (fewer than training.steps when a stop was asked for).
  absl::StatusOr<int64_t> Coordinate(const pb::Plan& plan, const Dataset& dataset,
                                     const Dataset* eval_dataset, double base_lr,
                                     Executors& executors, CoordinatorGate& gate) {
    const int64_t steps = plan.training().steps();
    const int64_t batch = plan.training().global_batch();
    const int log_every = plan.runtime().log_every();
    const int64_t max_skipped = plan.training().max_skipped_steps();
    // The resolved plan always has a checkpoint section (defaults made explicit); a dir means one.
    const bool checkpoints = !plan.checkpoint().dir().empty();
    const int64_t checkpoint_every = plan.checkpoint().every_steps();
    BatchSampler sampler(dataset.size(), batch, plan.data().shuffle(), plan.training().seed());
    const pb::CheckpointManifest* resumed =
        setup_.has_resume() ? &setup_.resume().manifest() : nullptr;
    const int64_t first_step = resumed != nullptr ? resumed->step() : 0;
    CheckpointProgress progress{
        .applied_steps = resumed != nullptr ? resumed->applied_steps() : 0,
        .skipped_in_a_row = resumed != nullptr ? resumed->skipped_in_a_row() : 0,
        .dataset_size = dataset.size()};
    std::unique_ptr<MetricsWriter> metrics;
    const std::string metrics_path =
        !options_.metrics_out.empty() ? options_.metrics_out : plan.runtime().metrics_out();
    if (!metrics_path.empty()) {
      ASSIGN_OR_RETURN(metrics, MetricsWriter::Open(metrics_path, /*append=*/resumed != nullptr));
    }

    const int replicas = plan.pipeline().data_parallel();
    logger_.Info(absl::StrCat(
        "plan '", plan.name(),
        "': ", replicas > 1 ? absl::StrCat(replicas, " replicas x ") : std::string(),
        plan.pipeline().stages(), " stages x ", plan.pipeline().micro_batches(), " micro-batches, ",
        pb::Schedule_Name(plan.pipeline().schedule()), ", remat ",
        pb::Remat_Name(plan.pipeline().remat()), ", batch ", batch, ", ", steps, " steps",
        resumed != nullptr ? absl::StrCat(" (resuming after step ", first_step, ")")
                           : std::string(),
        "; predicted bubble ", absl::StrFormat("%.1f%%", 100.0 * prediction_.bubble_fraction)));
    int64_t done = first_step;
    for (int64_t step = first_step; step < steps; ++step) {
      const absl::Time begin = absl::Now();
      pb::StepCommand command;
      command.set_step(step);
      command.set_lr(base_lr);
      for (int64_t index : sampler.IndicesForStep(step)) command.add_sample_indices(index);
      RETURN_IF_ERROR(control_->Broadcast(command, absl::Now() + timeout_, kControlTagStepCommand));
      RETURN_IF_ERROR(executors.train.RunStep(command).status());
      const double step_ms = absl::ToDoubleMilliseconds(absl::Now() - begin);
      ASSIGN_OR_RETURN(StepSummary summary,
                       Summarize(step, gate.reports(), batch, step_ms, gate.applied(),
                                 PredictionsPerSample(setup_)));
      if (metrics) RETURN_IF_ERROR(metrics->Write(ToMetricsRecord(summary)));
      if (log_every > 0 && ((step + 1) % log_every == 0 || step + 1 == steps || !summary.applied)) {
        logger_.Info(FormatProgressLine(summary, steps));
      }
      done = step + 1;
      if (summary.applied) {
        ++progress.applied_steps;
        progress.skipped_in_a_row = 0;
      } else {
        ++progress.skipped_in_a_row;
        logger_.Warning(
            SkippedStepWarning(step, gate.reports(), progress.skipped_in_a_row, max_skipped));
        if (max_skipped > 0 && progress.skipped_in_a_row >= max_skipped) {
          return absl::FailedPreconditionError(
              absl::StrCat("stopping: the last ", progress.skipped_in_a_row,
                           " steps were all skipped for non-finite losses or gradients "
                           "(training.max_skipped_steps: ",
                           max_skipped, "); lower the learning rate or check the data"));
        }
      }
      // A stop asked for during the last step changes nothing.
      const bool stop = gate.stop() && done < steps;
      const int64_t eval_every = plan.training().eval_every();
      if (!stop && executors.eval != nullptr && (done % eval_every == 0 || done == steps)) {
        ASSIGN_OR_RETURN(EvalSummary eval,
                         Evaluate(plan, *eval_dataset, done, *executors.eval, gate));
        logger_.Info(eval.FormatLine());
        if (metrics) RETURN_IF_ERROR(metrics->Write(eval.ToMetricsRecord()));
      }
      if (checkpoints && (stop || (checkpoint_every > 0 && done % checkpoint_every == 0))) {
        RETURN_IF_ERROR(SaveCheckpoint(done, progress, executors));
      }
      if (stop) {
        logger_.Warning(absl::StrCat(
            "stopping after step ", done, " of ", steps, " as asked (a signal)",
            checkpoints ? absl::StrCat("; continue with --resume latest (checkpoint.dir ",
                                       plan.checkpoint().dir(), ")")
                        : "; the plan has no checkpoint, so this run's progress is not saved",
            "; no export is written"));
        break;
      }
    }
    if (progress.applied_steps == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "no step applied an update: all ", done,
          " steps were skipped for non-finite losses or gradients (check the initial weights, the "
          "data and the learning rate); nothing is exported"));
    }
    pb::StepCommand stop;
    stop.set_stop(true);
    stop.set_interrupted(done < steps);
    RETURN_IF_ERROR(control_->Broadcast(stop, absl::Now() + timeout_, kControlTagStepCommand));
    return done;
  }

  // Rank 0: a checkpoint after `done` steps, through every rank.
  absl::Status SaveCheckpoint(int64_t done, const CheckpointProgress& progress,
                              Executors& executors) {
    RETURN_IF_ERROR(executors.checkpoints.Prepare(done));
    pb::StepCommand command;
    command.set_step(done);
    command.set_checkpoint(true);
    RETURN_IF_ERROR(control_->Broadcast(command, absl::Now() + timeout_, kControlTagStepCommand));
    return executors.checkpoints.Save(done, executors.parts, progress);
  }

  // Rank 0: one pass of the forward-only program over the held-out split (its first
  // training.eval_samples samples, or all), in batches of global_batch; the last batch is padded
  // with index -1, which counts nowhere. `after_step` training steps are done.
  absl::StatusOr<EvalSummary> Evaluate(const pb::Plan& plan, const Dataset& eval_dataset,
                                       int64_t after_step, StageExecutor& evaluator,
                                       CoordinatorGate& gate) {
    const absl::Time begin = absl::Now();
    const int64_t batch = plan.training().global_batch();
    int64_t samples = eval_dataset.size();
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
      RETURN_IF_ERROR(evaluator.RunStep(command).status());
      RETURN_IF_ERROR(summary.Add(gate.reports()));
    }
    summary.set_elapsed_ms(absl::ToDoubleMilliseconds(absl::Now() - begin));
    return summary;
  }

  // Ranks != 0: follow rank 0's commands until told to stop. Returns the steps done.
  absl::StatusOr<int64_t> Follow(Executors& executors) {
    int64_t done = setup_.has_resume() ? setup_.resume().manifest().step() : 0;
    while (true) {
      pb::StepCommand command;
      RETURN_IF_ERROR(control_->Broadcast(command, absl::Now() + timeout_, kControlTagStepCommand));
      if (command.stop()) return command.interrupted() ? done : setup_.plan().training().steps();
      if (command.checkpoint()) {
        RETURN_IF_ERROR(executors.checkpoints.Save(command.step(), executors.parts, {}));
        continue;
      }
      if (command.eval() && executors.eval == nullptr) {
        return absl::FailedPreconditionError(
            absl::StrCat("rank ", rank_, " was told to evaluate but has no evaluation program"));
      }
      StageExecutor& executor = command.eval() ? *executors.eval : executors.train;
      RETURN_IF_ERROR(executor.RunStep(command).status());
      if (!command.eval()) done = command.step() + 1;
    }
  }

  absl::Status ExportParameters(const pb::Plan& plan, const StageChunks& parameters) {
    pb::ParameterShard shard;
    shard.set_rank(rank_);
    // A rank that cannot read its parameters still takes part in the gather, carrying its
    // error, so no rank waits for it.
    const absl::StatusOr<std::vector<NamedTensorData>> exported = parameters.Export();
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
      const absl::Status written = WriteExport(plan, gathered);
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
  absl::Status WriteExport(const pb::Plan& plan, const std::vector<std::string>& gathered) {
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
    std::map<std::string, std::string> metadata = {
        {"format", "pt"},
        {"gpipe_plan", plan.name()},
        {"gpipe_steps", absl::StrCat(plan.training().steps())}};
    RETURN_IF_ERROR(WriteSafetensors(options_.export_path, all, metadata).status());
    logger_.Info(absl::StrCat("exported ", all.size(), " parameters to ", options_.export_path));
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

  const WorkerOptions& options_;
  MpiEnvironment& mpi_;
  const Logger& logger_;
  LayerRegistry registry_ = LayerRegistry::WithBuiltins();
  BackendRegistry backends_ = DefaultBackends();
  std::unique_ptr<ControlChannel> control_;
  int rank_ = 0;
  pb::Setup setup_;
  schedule::VerifyResult prediction_;
  absl::Duration timeout_ = absl::Seconds(300);
  std::unique_ptr<TraceSession> trace_;  // runtime.trace; null when not traced
};

}  // namespace

absl::Status RunWorker(const WorkerOptions& options, MpiEnvironment& mpi, const Logger& logger) {
  Worker worker(options, mpi, logger);
  return worker.Run();
}

}  // namespace gpipe

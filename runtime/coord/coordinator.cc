#include "runtime/coord/coordinator.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runtime/coord/step_summary.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

// The warning for a skipped step, naming where the non-finite values were.
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

// Class ids per sample: 1, or the positions of a sequence target ([T] for a language model).
int64_t PredictionsPerSample(const pb::Setup& setup) {
  int64_t n = 1;
  for (int64_t d : setup.target_shape()) n *= d;
  return n;
}

}  // namespace

Coordinator::Coordinator(ControlChannel& control, const pb::Setup& setup, RankStage& stage,
                         TraceSession* trace, const Logger& logger)
    : control_(control),
      setup_(setup),
      stage_(stage),
      trace_(trace),
      logger_(logger),
      sampler_(stage.dataset->size(), setup.plan().training().global_batch(),
               setup.plan().data().shuffle(), setup.plan().training().seed()),
      lr_schedule_(setup.plan().training(), stage.chunks->optimizer(0).base_lr()),
      work_(StepWorkOf(setup)) {}

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Start(
    ControlChannel& control, const pb::Setup& setup, RankStage& stage,
    const schedule::VerifyResult& prediction, const WorkerOptions& options, TraceSession* trace,
    const Logger& logger) {
  const pb::Plan& plan = setup.plan();
  std::unique_ptr<Coordinator> coordinator(new Coordinator(control, setup, stage, trace, logger));
  const pb::CheckpointManifest* resumed = setup.has_resume() ? &setup.resume().manifest() : nullptr;
  coordinator->progress_ =
      CheckpointProgress{.applied_steps = resumed != nullptr ? resumed->applied_steps() : 0,
                         .skipped_in_a_row = resumed != nullptr ? resumed->skipped_in_a_row() : 0,
                         .dataset_size = stage.dataset->size()};
  // The checkpoint resumed from is this run's latest only when it lies in checkpoint.dir (a
  // checkpoint elsewhere is not there to be named by an immediate save).
  if (resumed != nullptr && stage.checkpoints != nullptr &&
      setup.resume().dir() == stage.checkpoints->CheckpointPath(stage.steps_done)) {
    coordinator->saved_step_ = stage.steps_done;
  }
  const std::string metrics_path =
      !options.metrics_out.empty() ? options.metrics_out : plan.runtime().metrics_out();
  if (!metrics_path.empty()) {
    ASSIGN_OR_RETURN(coordinator->metrics_,
                     MetricsWriter::Open(metrics_path, /*append=*/resumed != nullptr));
  }
  const int replicas = plan.pipeline().data_parallel();
  logger.Info(absl::StrCat(
      "plan '", plan.name(),
      "': ", replicas > 1 ? absl::StrCat(replicas, " replicas x ") : std::string(),
      plan.pipeline().stages(), " stages x ", plan.pipeline().micro_batches(), " micro-batches, ",
      pb::Schedule_Name(plan.pipeline().schedule()), ", remat ",
      pb::Remat_Name(plan.pipeline().remat()), ", batch ", plan.training().global_batch(), ", ",
      plan.training().steps(), " steps",
      resumed != nullptr ? absl::StrCat(" (resuming after step ", stage.steps_done, ")")
                         : std::string(),
      "; predicted bubble ", absl::StrFormat("%.1f%%", 100.0 * prediction.bubble_fraction)));
  return coordinator;
}

absl::Status Coordinator::Pause(bool interrupted) {
  pb::StepCommand pause;
  pause.set_pause(true);
  pause.set_interrupted(interrupted);
  return control_.Broadcast(pause, absl::Now() + stage_.timeout, kControlTagStepCommand);
}

absl::StatusOr<bool> Coordinator::Train(int64_t last, const WorkerCallbacks& callbacks) {
  const pb::Plan& plan = setup_.plan();
  const int64_t steps = plan.training().steps();
  // The resolved plan always has a checkpoint section (defaults made explicit); a dir means one.
  const bool checkpoints = !plan.checkpoint().dir().empty();
  const int64_t checkpoint_every = plan.checkpoint().every_steps();
  int64_t& done = stage_.steps_done;
  const std::string unsaved =
      checkpoints ? absl::StrCat("; continue with --resume latest (checkpoint.dir ",
                                 plan.checkpoint().dir(), ")")
      : setup_.export_parameters()
          ? "; the plan has no checkpoint, so the weights go to the --export file only"
          : "; the plan has no checkpoint, so this run's progress is not saved";
  if (!start_checked_) {
    start_checked_ = true;
    ASSIGN_OR_RETURN(const bool stop_at_start, CheckStopAtStart());
    if (stop_at_start) {
      // Nothing new to save: the state is the initial one or the checkpoint resumed from.
      logger_.Warning(absl::StrCat("stopping before step ", done + 1, " of ", steps,
                                   " as asked (a signal during start-up)",
                                   checkpoints ? "; no checkpoint: no step ran" : unsaved));
      RETURN_IF_ERROR(Pause(true));
      return true;
    }
  }
  bool stop = false;
  while (done < last && !stop) {
    const int64_t step = done;
    // Skipped steps do not advance the schedule: it counts applied updates only.
    ASSIGN_OR_RETURN(const StepSummary summary,
                     RunStep(step, lr_schedule_.LrAt(progress_.applied_steps)));
    done = step + 1;
    RETURN_IF_ERROR(CountSkips(step, summary.applied));
    const bool asked = callbacks.on_step != nullptr && callbacks.on_step(summary);
    // A stop asked for during the last step changes nothing (unless it abandons the evaluation
    // that follows).
    stop = (stage_.gate->stop() || asked) && done < steps;
    const int64_t eval_every = plan.training().eval_every();
    if (!stop && stage_.evaluator != nullptr && (done % eval_every == 0 || done == steps)) {
      ASSIGN_OR_RETURN(std::optional<EvalSummary> eval, EvaluateAfter(done));
      if (eval.has_value()) {
        RETURN_IF_ERROR(Report(*std::move(eval), callbacks).status());
        stop = stage_.gate->stop() && done < steps;
      } else {
        stop = true;
      }
    }
    // The run's last step is always saved, whatever every_steps says.
    if (checkpoints &&
        (stop || done == steps || (checkpoint_every > 0 && done % checkpoint_every == 0))) {
      RETURN_IF_ERROR(SaveCheckpointAfter(done, callbacks));
    }
    if (stop) {
      logger_.Warning(absl::StrCat("stopping after step ", done, " of ", steps, " as asked",
                                   asked ? " (by the program)" : " (a signal)", unsaved));
    }
  }
  if (done == steps && progress_.applied_steps == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no step applied an update: all ", done,
        " steps were skipped for non-finite losses or gradients (check the initial weights, the "
        "data and the learning rate); nothing is exported"));
  }
  RETURN_IF_ERROR(Pause(stop));
  return stop;
}

absl::StatusOr<bool> Coordinator::CheckStopAtStart() {
  pb::StepCommand command;
  command.set_step(stage_.steps_done);
  command.set_stop_check(true);
  RETURN_IF_ERROR(
      control_.Broadcast(command, absl::Now() + stage_.timeout, kControlTagStepCommand));
  pb::StepReport report;
  report.set_rank(0);
  report.set_stage(setup_.stage());
  report.set_step(stage_.steps_done);
  RETURN_IF_ERROR(stage_.gate->Synchronize(report).status());
  return stage_.gate->stop();
}

absl::StatusOr<StepSummary> Coordinator::RunStep(int64_t step, double lr) {
  const pb::Plan& plan = setup_.plan();
  const int64_t steps = plan.training().steps();
  const int log_every = plan.runtime().log_every();
  const absl::Time begin = absl::Now();
  pb::StepCommand command;
  command.set_step(step);
  command.set_lr(lr);
  for (int64_t index : sampler_.IndicesForStep(step)) command.add_sample_indices(index);
  RETURN_IF_ERROR(
      control_.Broadcast(command, absl::Now() + stage_.timeout, kControlTagStepCommand));
  RETURN_IF_ERROR(stage_.executor->RunStep(command).status());
  if (trace_ != nullptr) trace_->SaveProgress();
  const double step_ms = absl::ToDoubleMilliseconds(absl::Now() - begin);
  ASSIGN_OR_RETURN(StepSummary summary,
                   Summarize(step, stage_.gate->reports(), plan.training().global_batch(), step_ms,
                             stage_.gate->applied(), PredictionsPerSample(setup_)));
  AddThroughput(work_, summary);
  summary.lr = lr;
  summary.grad_norm = stage_.gate->grad_norm();
  if (metrics_) RETURN_IF_ERROR(metrics_->Write(ToMetricsRecord(summary)));
  if (log_every > 0 && ((step + 1) % log_every == 0 || step + 1 == steps || !summary.applied)) {
    logger_.Info(FormatProgressLine(summary, steps));
  }
  return summary;
}

absl::Status Coordinator::CountSkips(int64_t step, bool applied) {
  if (applied) {
    ++progress_.applied_steps;
    progress_.skipped_in_a_row = 0;
    return absl::OkStatus();
  }
  const int64_t max_skipped = setup_.plan().training().max_skipped_steps();
  ++progress_.skipped_in_a_row;
  logger_.Warning(
      SkippedStepWarning(step, stage_.gate->reports(), progress_.skipped_in_a_row, max_skipped));
  if (max_skipped > 0 && progress_.skipped_in_a_row >= max_skipped) {
    return absl::FailedPreconditionError(
        absl::StrCat("stopping: the last ", progress_.skipped_in_a_row,
                     " steps were all skipped for non-finite losses or gradients "
                     "(training.max_skipped_steps: ",
                     max_skipped, "); lower the learning rate or check the data"));
  }
  return absl::OkStatus();
}

absl::StatusOr<EvalSummary> Coordinator::Evaluate(const WorkerCallbacks& callbacks) {
  ASSIGN_OR_RETURN(std::optional<EvalSummary> eval, EvaluateAfter(stage_.steps_done));
  if (!eval.has_value()) return absl::CancelledError("evaluation abandoned: stop requested");
  return Report(*std::move(eval), callbacks);
}

absl::Status Coordinator::SaveCheckpoint(const WorkerCallbacks& callbacks) {
  return SaveCheckpointAfter(stage_.steps_done, callbacks);
}

absl::StatusOr<EvalSummary> Coordinator::Report(EvalSummary eval,
                                                const WorkerCallbacks& callbacks) {
  logger_.Info(eval.FormatLine());
  if (metrics_) RETURN_IF_ERROR(metrics_->Write(eval.ToMetricsRecord()));
  if (callbacks.on_eval != nullptr) callbacks.on_eval(eval);
  return eval;
}

absl::Status Coordinator::SaveCheckpointAfter(int64_t done, const WorkerCallbacks& callbacks) {
  if (done == saved_step_) {
    // Already there (the last step's, or the one resumed from): rewriting it would leave
    // `latest` naming a checkpoint in the making.
    if (callbacks.on_checkpoint != nullptr) {
      callbacks.on_checkpoint(done, stage_.checkpoints->CheckpointPath(done));
    }
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(stage_.checkpoints->Prepare(done));
  pb::StepCommand command;
  command.set_step(done);
  command.set_checkpoint(true);
  RETURN_IF_ERROR(
      control_.Broadcast(command, absl::Now() + stage_.timeout, kControlTagStepCommand));
  RETURN_IF_ERROR(SettleParameters(stage_));
  RETURN_IF_ERROR(stage_.checkpoints->Save(done, *stage_.chunks, progress_));
  saved_step_ = done;
  if (callbacks.on_checkpoint != nullptr) {
    callbacks.on_checkpoint(done, stage_.checkpoints->CheckpointPath(done));
  }
  return absl::OkStatus();
}

// Its first training.eval_samples samples, or all, in batches of global_batch; the last batch is
// padded with index -1, which counts nowhere. Every batch meets at the gate, which carries stop
// requests as a training step's barrier does: all ranks leave the evaluation after that batch.
absl::StatusOr<std::optional<EvalSummary>> Coordinator::EvaluateAfter(int64_t after_step) {
  const pb::Plan& plan = setup_.plan();
  const absl::Time begin = absl::Now();
  const int64_t batch = plan.training().global_batch();
  int64_t samples = stage_.eval_dataset->size();
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
    RETURN_IF_ERROR(
        control_.Broadcast(command, absl::Now() + stage_.timeout, kControlTagStepCommand));
    RETURN_IF_ERROR(stage_.evaluator->RunStep(command).status());
    if (trace_ != nullptr) trace_->SaveProgress();
    RETURN_IF_ERROR(summary.Add(stage_.gate->reports()));
    const int64_t batches = (samples + batch - 1) / batch;
    const int64_t finished = first / batch + 1;
    if (stage_.gate->stop() && finished < batches) {
      logger_.Warning(absl::StrCat("evaluation abandoned: stop requested (after ", finished, " of ",
                                   batches, " batches of the evaluation after step ", after_step,
                                   ")"));
      return std::nullopt;
    }
  }
  summary.set_elapsed_ms(absl::ToDoubleMilliseconds(absl::Now() - begin));
  return std::optional<EvalSummary>(std::move(summary));
}

}  // namespace gpipe

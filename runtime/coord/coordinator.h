// Coordinator: rank 0's side of the step protocol (worker.cc). Each step it samples the batch,
// broadcasts the StepCommand, runs stage 0's program itself, turns the gate's reports into the
// progress line and the metrics record, counts skipped steps and stops where the plan or a stop
// request says; it runs the evaluations (training.eval_every) and decides the checkpoints
// (checkpoint.every_steps, and at a stop). Rank 0 only; single-threaded.
#ifndef GPIPE_RUNTIME_COORD_COORDINATOR_H_
#define GPIPE_RUNTIME_COORD_COORDINATOR_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/control.pb.h"
#include "runtime/comm/control_channel.h"
#include "runtime/coord/checkpoint_session.h"
#include "runtime/coord/eval_summary.h"
#include "runtime/coord/stage_builder.h"
#include "runtime/coord/step_summary.h"
#include "runtime/coord/step_work.h"
#include "runtime/coord/trace_session.h"
#include "runtime/coord/worker.h"
#include "runtime/coord/worker_options.h"
#include "runtime/core/logger.h"
#include "runtime/data/batch_sampler.h"
#include "runtime/data/dataset.h"
#include "runtime/schedule/verifier.h"
#include "runtime/train/lr_schedule.h"
#include "runtime/train/metrics_writer.h"

namespace gpipe {

class Coordinator {
 public:
  // Once, after BuildStage: the sampler, the metrics file (options.metrics_out, else
  // runtime.metrics_out; appended to when resuming) and the start-up line. `trace` (null when
  // not traced) saves its progress after every step and evaluation batch. Everything passed
  // must outlive the coordinator.
  static absl::StatusOr<std::unique_ptr<Coordinator>> Start(
      ControlChannel& control, const pb::Setup& setup, RankStage& stage,
      const schedule::VerifyResult& prediction, const WorkerOptions& options, TraceSession* trace,
      const Logger& logger);

  // Drives the steps up to `last`, the evaluations every eval_every steps and after the last,
  // and the checkpoints every checkpoint.every_steps, after the run's last step and when asked
  // to stop; then returns the other ranks to the program (Pause). The first call first checks
  // with every rank whether a stop was asked for during start-up (then no step runs). A stop
  // abandons an evaluation in progress at its next batch. Returns whether a stop was asked for.
  absl::StatusOr<bool> Train(int64_t last, const WorkerCallbacks& callbacks);
  // An evaluation after the steps done so far, reported (line, metrics record, on_eval).
  // CANCELLED when a stop request abandoned it (the other ranks are then still following).
  absl::StatusOr<EvalSummary> Evaluate(const WorkerCallbacks& callbacks);
  // A checkpoint after the steps done so far, through every rank.
  absl::Status SaveCheckpoint(const WorkerCallbacks& callbacks);
  // Tells the other ranks to return to the program (their FollowCommands ends).
  absl::Status Pause(bool interrupted);

 private:
  Coordinator(ControlChannel& control, const pb::Setup& setup, RankStage& stage,
              TraceSession* trace, const Logger& logger);

  // One training step at learning rate `lr`: command, stage 0's program, summary, metrics record
  // and progress line.
  absl::StatusOr<StepSummary> RunStep(int64_t step, double lr);
  // Counts step `step` as applied or skipped; fails after training.max_skipped_steps in a row.
  absl::Status CountSkips(int64_t step, bool applied);
  // Every rank meets at the gate without running a step; whether one was asked to stop.
  absl::StatusOr<bool> CheckStopAtStart();
  // One pass of the forward-only program over the held-out split; `after_step` steps are done.
  // nullopt when a stop request (seen at a batch's barrier) abandoned it.
  absl::StatusOr<std::optional<EvalSummary>> EvaluateAfter(int64_t after_step);
  // Logs an evaluation, writes its metrics record and calls on_eval.
  absl::StatusOr<EvalSummary> Report(EvalSummary eval, const WorkerCallbacks& callbacks);
  // A checkpoint after `done` steps, through every rank (none when it exists already).
  absl::Status SaveCheckpointAfter(int64_t done, const WorkerCallbacks& callbacks);

  ControlChannel& control_;
  const pb::Setup& setup_;
  RankStage& stage_;
  TraceSession* trace_;  // null when not traced
  const Logger& logger_;
  BatchSampler sampler_;
  // The learning rate of each update, from the updates applied so far (progress_.applied_steps).
  LrSchedule lr_schedule_;
  // Each stage's FLOPs and the tokens of a step, for the throughput of every step.
  const StepWork work_;
  std::unique_ptr<MetricsWriter> metrics_;  // null without a metrics file
  CheckpointProgress progress_;
  bool start_checked_ = false;  // CheckStopAtStart ran (the first Train)
  int64_t saved_step_ = -1;     // the step of the last checkpoint this run saved or resumed
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COORD_COORDINATOR_H_

// gpipe/runtime.h — a pipeline-parallel training job inside a program's own MPI job.
//
// Contract: Runtime::Create is collective over `comm`: every rank of it calls Create with the
// same extensions (rank 0's plan and options decide; see PlanSource). The runtime duplicates
// `comm`, so its messages never meet the program's or another runtime's: two runtimes on split
// (or the same) communicators work side by side in one process, and nothing in gpipe is global.
// Rank r of the communicator runs stage r % stages of replica r / stages (as gpipe-worker
// ranks do); the communicator's size must be pipeline.stages x pipeline.data_parallel.
//
// Every method but the accessors is collective and blocking: every rank calls it, in the same
// order, from the thread that created the runtime (MPI must be initialized with at least
// MPI_THREAD_SERIALIZED when other threads use MPI too). Waits are bounded by the plan's
// runtime.timeouts. Destroying a runtime frees its communicator, which is collective as well:
// destroy runtimes in the same order on every rank.
//
// Errors: a process that its launcher started as one of several but that MPI made a singleton
// (srun without a working PMI) is FAILED_PRECONDITION naming the fix. A rejected plan is
// INVALID_ARGUMENT (file:line:col and every problem) on every rank,
// and the communicator stays usable. A failure while training is reported on every rank within
// the wait deadline, naming the rank, stage, step, micro-batch and instruction; the runtime then
// reports failed(), every later call returns FAILED_PRECONDITION, and MPI may hold unfinished
// operations: end the program with MPI_Abort (or exit without MPI_Finalize).
//
// Thread-safety: a runtime is driven by one thread; the accessors are safe from it only.
#ifndef GPIPE_RUNTIME_H_
#define GPIPE_RUNTIME_H_

#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gpipe/callbacks.h"
#include "gpipe/extensions.h"
#include "gpipe/metrics.h"
#include "gpipe/plan.h"
#include "proto/plan.pb.h"

namespace gpipe {

// How a runtime runs beyond its plan. Only rank 0's paths matter (it checks them before the
// first step; the plan's runtime.metrics_out and runtime.trace apply when these are empty).
struct RuntimeOptions {
  std::string metrics_out;  // JSON Lines, one record per step and evaluation
  std::string trace;        // a Chrome/Perfetto trace of the run, written by Finish
  std::string init_from;    // initial parameters by name: as gpipe-worker's --init-from PATH
  // Continue from a checkpoint: "latest" (the plan's checkpoint.dir), a checkpoint directory or
  // one of its step-N directories. Excludes init_from.
  std::string resume;
  // Start over in a checkpoint.dir that holds complete checkpoints of an earlier run (without it,
  // and without resume, such a run is refused): they are removed once this run's first
  // checkpoint is complete. Excludes resume.
  bool start_over = false;
  // Polled on every rank at each step's gradient-sync barrier: true on any rank ends training
  // after that step (as StepAction::kStop does). Null: never.
  std::function<bool()> stop_requested;
  // How long ranks wait for rank 0 to check the plan and send their part.
  absl::Duration startup_timeout = absl::Seconds(120);
  // Where log lines go ("[gpipe rN] ..."); must outlive the runtime.
  std::FILE* log = stderr;
};

struct TrainResult {
  int64_t steps_done = 0;  // training steps done so far (a resumed run counts the earlier ones)
  bool finished = false;   // steps_done == training.steps
  bool stopped = false;    // a stop was asked for (stop_requested or a callback)
};

class Runtime {
 public:
  static absl::StatusOr<std::unique_ptr<Runtime>> Create(MPI_Comm comm, const PlanSource& plan,
                                                         const Extensions& extensions = {},
                                                         RuntimeOptions options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Trains until training.steps (or a stop), evaluating and checkpointing as the plan says.
  absl::StatusOr<TrainResult> Train(const Callbacks& callbacks = {});
  // At most `steps` more steps (>= 1), then returns; call again to go on.
  absl::StatusOr<TrainResult> RunSteps(int64_t steps, const Callbacks& callbacks = {});
  // One pass over the held-out split (the plan needs one and training.eval_every > 0). The
  // metrics on rank 0, nullopt on the other ranks; CANCELLED on every rank when stop_requested
  // abandoned it at a batch boundary.
  absl::StatusOr<std::optional<EvalMetrics>> Evaluate(const Callbacks& callbacks = {});
  // A checkpoint of the current state in the plan's checkpoint.dir (which it needs).
  absl::Status SaveCheckpoint(const Callbacks& callbacks = {});
  // Every parameter and buffer, by name, into one safetensors file written by rank 0 (the other
  // ranks' `path` is ignored).
  absl::Status Export(const std::string& path);
  // Writes the trace (when one was asked for) and ends the runtime: later calls fail.
  absl::Status Finish();

  int rank() const;  // in the runtime's communicator
  int world_size() const;
  int stage() const;
  int replica() const;
  int64_t steps_done() const;
  // The plan as resolved by rank 0 (defaults explicit, partition filled in).
  const pb::Plan& plan() const;
  // Rank 0: every step's metrics so far, in order (empty on the other ranks).
  const std::vector<StepMetrics>& history() const;
  bool failed() const;

 private:
  class Impl;
  explicit Runtime(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_H_

// WorkerSession: one rank's part of a gpipe job (one stage; rank 0 also coordinates), driven by
// a program: gpipe-worker (RunWorker below) or an embedding program (include/gpipe/runtime.h).
// The protocol is documented in worker.cc, where it is implemented.
//
// Every method but the accessors is collective: every rank of the communicator calls it, in the
// same order. On failure every rank returns a non-OK status. A rejected plan is reported the
// same way on every rank and failed() stays false (the communicator is intact). A failure during
// training is announced to the other ranks (they stop within their wait deadlines) and failed()
// becomes true: the communicator may hold unfinished operations, so the program must end
// without MPI_Finalize (MPI_Abort, or exit). After a failure every method returns
// FAILED_PRECONDITION. A stop (WorkerOptions::stop_requested, or a callback's) is not a
// failure: Train returns with `stopped` set. Single-threaded: one thread drives a session.
#ifndef GPIPE_RUNTIME_COORD_WORKER_H_
#define GPIPE_RUNTIME_COORD_WORKER_H_

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "layers/registry.h"
#include "proto/plan.pb.h"
#include "runtime/backend/backend_registry.h"
#include "runtime/comm/mpi_environment.h"
#include "runtime/coord/eval_summary.h"
#include "runtime/coord/step_summary.h"
#include "runtime/coord/worker_options.h"
#include "runtime/core/logger.h"
#include "runtime/data/data_source_registry.h"

namespace gpipe {

// What the program adds to gpipe's own layers and data sources, and the backends it offers.
// Every rank passes the same. The registries must outlive the session.
struct WorkerExtensions {
  const LayerRegistry* layers = nullptr;             // null: LayerRegistry::WithBuiltins()
  const DataSourceRegistry* data_sources = nullptr;  // null: none (data.custom is refused)
  const BackendRegistry* backends = nullptr;         // null: DefaultBackends()
};

// Called on rank 0 only, on the thread that drives the session.
struct WorkerCallbacks {
  // After every training step. Returning true stops training after this step as a stop signal
  // does (a checkpoint is saved when the plan has checkpoint.dir).
  std::function<bool(const StepSummary&)> on_step;
  // After every evaluation (training.eval_every, or WorkerSession::Evaluate).
  std::function<void(const EvalSummary&)> on_eval;
  // After a checkpoint is complete: the steps it holds and its directory.
  std::function<void(int64_t step, const std::string& directory)> on_checkpoint;
};

struct TrainProgress {
  int64_t steps_done = 0;  // training steps completed, from the first (a resumed run counts all)
  bool finished = false;   // steps_done == training.steps
  bool stopped = false;    // a stop was asked for (a signal, or a callback)
};

class WorkerSession {
 public:
  // `comm` is used as given (the embedding API passes its own duplicate); it must outlive the
  // session. Nothing happens until Start.
  WorkerSession(WorkerOptions options, WorkerExtensions extensions, MPI_Comm comm,
                const Logger& logger);
  ~WorkerSession();
  WorkerSession(const WorkerSession&) = delete;
  WorkerSession& operator=(const WorkerSession&) = delete;

  // Rank 0 resolves the job (options' plan) and sends every rank its part; every rank builds its
  // stage: backend, parameters (initialized, --init-from, or restored with --resume), data,
  // channels. A rejected plan is INVALID_ARGUMENT (or the loader's code) on every rank.
  absl::Status Start();
  // Runs training steps until training.steps, `max_steps` more (< 0: no limit) or a stop,
  // evaluating and checkpointing as the plan says. A run that ends with no update applied fails.
  absl::StatusOr<TrainProgress> Train(int64_t max_steps, const WorkerCallbacks& callbacks = {});
  // One pass over the held-out split (the plan's data must have one). The summary on rank 0,
  // nullopt elsewhere; on_eval is called too. CANCELLED on every rank when a stop request
  // (WorkerOptions::stop_requested) abandoned it at a batch boundary (not a failure).
  absl::StatusOr<std::optional<EvalSummary>> Evaluate(const WorkerCallbacks& callbacks = {});
  // A checkpoint of the state after steps_done() steps in checkpoint.dir (the plan must have
  // one); on_checkpoint is called on rank 0.
  absl::Status SaveCheckpoint(const WorkerCallbacks& callbacks = {});
  // Every parameter and buffer into one safetensors file written by rank 0: rank 0's `path` (the
  // others' is ignored), checked before anything is gathered. `note` is added to rank 0's line
  // in parentheses.
  absl::Status Export(const std::string& path, const std::string& note = "");
  // Ends the session: writes the trace (runtime.trace). Further calls fail.
  absl::Status Finish();

  bool failed() const;
  int rank() const;
  int stage() const;
  // The data-parallel replica this rank's stage belongs to; valid after a successful Start.
  int replica() const;
  // The resolved plan (defaults explicit); valid after a successful Start.
  const pb::Plan& plan() const;
  int64_t steps_done() const;
  // Whether rank 0's options asked for an export (WorkerOptions::export_path; its path was
  // checked at start-up).
  bool export_requested() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// gpipe-worker's whole run: Start, Train to the end, Export (--export; after a stop only when the
// plan has no checkpoint), Finish.
// Returns CANCELLED after a stop; after a failure during training marks `mpi` as aborting, so
// the process exits without MPI_Finalize.
absl::Status RunWorker(const WorkerOptions& options, MpiEnvironment& mpi, const Logger& logger);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COORD_WORKER_H_

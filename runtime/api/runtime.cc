#include "gpipe/runtime.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "launcher/environment.h"
#include "launcher/singleton_check.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/mpi_status.h"
#include "runtime/coord/worker.h"
#include "runtime/core/logger.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

StepMetrics ToMetrics(const StepSummary& summary) {
  return StepMetrics{.step = summary.step,
                     .loss = summary.loss,
                     .accuracy = summary.accuracy,
                     .applied = summary.applied,
                     .step_ms = summary.step_ms,
                     .samples_per_second = summary.samples_per_s,
                     .tokens_per_second = summary.tokens_per_s,
                     .mfu = summary.mfu,
                     .bubble_fraction = summary.bubble,
                     .replica_loss = summary.replica_loss,
                     .peak_bytes = summary.peak_bytes,
                     .bytes_sent = summary.bytes_sent,
                     .tflops_per_rank = summary.tflops_per_rank};
}

EvalMetrics ToMetrics(const EvalSummary& summary, int64_t after_step) {
  return EvalMetrics{.after_step = after_step,
                     .samples = summary.samples(),
                     .loss = summary.loss(),
                     .accuracy = summary.accuracy(),
                     .elapsed_ms = summary.elapsed_ms()};
}

WorkerOptions ToWorkerOptions(const PlanSource& plan, RuntimeOptions& options) {
  WorkerOptions worker;
  if (plan.is_file()) {
    worker.plan_path = plan.path_or_name();
  } else {
    worker.plan_text = plan.text();
    worker.plan_source_name = plan.path_or_name();
    worker.plan_directory = plan.directory();
  }
  worker.overrides = plan.overrides();
  worker.metrics_out = options.metrics_out;
  worker.trace = options.trace;
  worker.init_from = options.init_from;
  worker.resume = options.resume;
  worker.start_over = options.start_over;
  worker.stop_requested = std::move(options.stop_requested);
  worker.startup_timeout = options.startup_timeout;
  return worker;
}

}  // namespace

// The runtime's duplicate of the program's communicator, freed last (after everything that uses
// it), unless the job failed: a failed job may leave operations on it that never complete, so it
// is left for the program's MPI_Abort.
struct OwnedCommunicator {
  MPI_Comm comm = MPI_COMM_NULL;
  bool leave = false;
  ~OwnedCommunicator() {
    if (!leave) FreeCommunicator(comm);
  }
};

class Runtime::Impl {
 public:
  // Takes ownership of `comm` (a duplicate made for this runtime).
  Impl(MPI_Comm comm, int rank, int size, const PlanSource& plan, const Extensions& extensions,
       RuntimeOptions options)
      : comm_{.comm = comm},
        rank_(rank),
        size_(size),
        extensions_(extensions),
        logger_(rank, options.log != nullptr ? options.log : stderr),
        session_(ToWorkerOptions(plan, options),
                 WorkerExtensions{.layers = &extensions_.layers(),
                                  .data_sources = &extensions_.data_sources()},
                 comm_.comm, logger_) {}

  // The session goes first (its channels use the communicator), then comm_ frees it.
  ~Impl() { comm_.leave = session_.failed(); }

  WorkerSession& session() { return session_; }
  const WorkerSession& session() const { return session_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  std::vector<StepMetrics>& history() { return history_; }

  // The session's callbacks from the program's: metrics are converted and recorded.
  WorkerCallbacks Wrap(const Callbacks& callbacks) {
    WorkerCallbacks wrapped;
    wrapped.on_step = [this, &callbacks](const StepSummary& summary) {
      history_.push_back(ToMetrics(summary));
      return callbacks.on_step != nullptr &&
             callbacks.on_step(history_.back()) == StepAction::kStop;
    };
    if (callbacks.on_evaluation != nullptr) {
      wrapped.on_eval = [this, &callbacks](const EvalSummary& summary) {
        callbacks.on_evaluation(ToMetrics(summary, session_.steps_done()));
      };
    }
    if (callbacks.on_checkpoint != nullptr) {
      wrapped.on_checkpoint = [&callbacks](int64_t step, const std::string& directory) {
        callbacks.on_checkpoint(CheckpointInfo{.step = step, .directory = directory});
      };
    }
    return wrapped;
  }

 private:
  OwnedCommunicator comm_;  // first: destroyed last
  int rank_;
  int size_;
  const Extensions extensions_;  // the session refers to its registries
  const Logger logger_;
  WorkerSession session_;
  std::vector<StepMetrics> history_;
};

absl::StatusOr<std::unique_ptr<Runtime>> Runtime::Create(MPI_Comm comm, const PlanSource& plan,
                                                         const Extensions& extensions,
                                                         RuntimeOptions options) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    return absl::FailedPreconditionError(
        "gpipe::Runtime::Create needs MPI initialized (MPI_Init_thread) first");
  }
  if (comm == MPI_COMM_NULL) {
    return absl::InvalidArgumentError("gpipe::Runtime::Create got MPI_COMM_NULL");
  }
  // A program that srun or another MPI's launcher started N times, each an MPI singleton, would
  // train the whole job N times over: refused, naming the launcher and the fix.
  int world_size = 0;
  RETURN_IF_ERROR(
      MpiStatus(MPI_Comm_size(MPI_COMM_WORLD, &world_size), "MPI_Comm_size(MPI_COMM_WORLD)"));
  if (absl::Status alone = CheckNotAStraySingleton(ProcessEnvironment(), world_size); !alone.ok()) {
    Logger(0, options.log != nullptr ? options.log : stderr).Error(alone.message());
    return alone;
  }
  MPI_Comm own = MPI_COMM_NULL;
  RETURN_IF_ERROR(MpiStatus(MPI_Comm_dup(comm, &own), "MPI_Comm_dup (the runtime's communicator)"));
  // gpipe turns MPI errors into statuses with deadlines of its own.
  int rank = 0;
  int size = 0;
  absl::Status described =
      MpiStatus(MPI_Comm_set_errhandler(own, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  if (described.ok()) described = MpiStatus(MPI_Comm_rank(own, &rank), "MPI_Comm_rank");
  if (described.ok()) described = MpiStatus(MPI_Comm_size(own, &size), "MPI_Comm_size");
  if (!described.ok()) {
    FreeCommunicator(own);
    return described;
  }
  auto impl = std::make_unique<Impl>(own, rank, size, plan, extensions, std::move(options));
  RETURN_IF_ERROR(impl->session().Start());
  return std::unique_ptr<Runtime>(new Runtime(std::move(impl)));
}

Runtime::Runtime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Runtime::~Runtime() = default;

absl::StatusOr<TrainResult> Runtime::Train(const Callbacks& callbacks) {
  ASSIGN_OR_RETURN(const TrainProgress progress,
                   impl_->session().Train(-1, impl_->Wrap(callbacks)));
  return TrainResult{.steps_done = progress.steps_done,
                     .finished = progress.finished,
                     .stopped = progress.stopped};
}

absl::StatusOr<TrainResult> Runtime::RunSteps(int64_t steps, const Callbacks& callbacks) {
  if (steps < 1) {
    return absl::InvalidArgumentError(absl::StrCat("RunSteps(", steps, "): run at least 1 step"));
  }
  ASSIGN_OR_RETURN(const TrainProgress progress,
                   impl_->session().Train(steps, impl_->Wrap(callbacks)));
  return TrainResult{.steps_done = progress.steps_done,
                     .finished = progress.finished,
                     .stopped = progress.stopped};
}

absl::StatusOr<std::optional<EvalMetrics>> Runtime::Evaluate(const Callbacks& callbacks) {
  ASSIGN_OR_RETURN(const std::optional<EvalSummary> summary,
                   impl_->session().Evaluate(impl_->Wrap(callbacks)));
  if (!summary.has_value()) return std::nullopt;
  return ToMetrics(*summary, impl_->session().steps_done());
}

absl::Status Runtime::SaveCheckpoint(const Callbacks& callbacks) {
  return impl_->session().SaveCheckpoint(impl_->Wrap(callbacks));
}

absl::Status Runtime::Export(const std::string& path) { return impl_->session().Export(path); }
absl::Status Runtime::Finish() { return impl_->session().Finish(); }

int Runtime::rank() const { return impl_->rank(); }
int Runtime::world_size() const { return impl_->size(); }
int Runtime::stage() const { return impl_->session().stage(); }
int Runtime::replica() const { return impl_->session().replica(); }
int64_t Runtime::steps_done() const { return impl_->session().steps_done(); }
const pb::Plan& Runtime::plan() const { return impl_->session().plan(); }
const std::vector<StepMetrics>& Runtime::history() const { return impl_->history(); }
bool Runtime::failed() const { return impl_->session().failed(); }

}  // namespace gpipe

// The stage builder: what a rank sets up once, before the first step (the start-up and groups of
// the step protocol in worker.cc). ReceiveSetup brings every rank its Setup, resolved by rank 0;
// BuildStage makes the rank's stage from it: backend, chunks (parameters initialized, read from
// --init-from or restored with --resume), data, data channel, reduce groups and executors, all
// owned by one RankStage. Collective: every rank calls both, in this order.
#ifndef GPIPE_RUNTIME_COORD_STAGE_BUILDER_H_
#define GPIPE_RUNTIME_COORD_STAGE_BUILDER_H_

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "layers/registry.h"
#include "proto/control.pb.h"
#include "runtime/backend/backend_registry.h"
#include "runtime/ckpt/checkpoint_lock.h"
#include "runtime/comm/control_channel.h"
#include "runtime/comm/data_channel.h"
#include "runtime/coord/checkpoint_session.h"
#include "runtime/coord/coordinator_gate.h"
#include "runtime/coord/reduce_groups.h"
#include "runtime/coord/trace_session.h"
#include "runtime/coord/worker_options.h"
#include "runtime/core/file_ownership.h"
#include "runtime/core/logger.h"
#include "runtime/data/data_source_registry.h"
#include "runtime/data/dataset.h"
#include "runtime/exec/stage_chunks.h"
#include "runtime/exec/stage_executor.h"
#include "runtime/schedule/verifier.h"

namespace gpipe {

// This rank's Setup as rank 0 resolved it (an error Setup when rank 0 rejected the plan).
struct ReceivedSetup {
  pb::Setup setup;
  schedule::VerifyResult prediction;  // rank 0 only: the schedule simulated with FLOP costs
  RunFiles files;                     // rank 0 only: what the run reads, keeps and writes
  std::optional<CheckpointDirLock> checkpoint_lock;  // rank 0 only: held for the job's life
};

// Rank 0 resolves the job (ResolveJob) and sends every rank its Setup, or the rejection to all;
// the other ranks wait up to options.startup_timeout for theirs. Errors returned here are
// transport failures.
absl::StatusOr<ReceivedSetup> ReceiveSetup(ControlChannel& control, const WorkerOptions& options,
                                           const LayerRegistry& layers,
                                           const DataSourceRegistry* data_sources);

// Everything this rank's stage runs with. Members are in dependency order: later ones refer to
// earlier ones, and they are destroyed in reverse.
struct RankStage {
  int stage = 0;
  int replica = 0;                              // the data-parallel replica this rank is part of
  absl::Duration timeout = absl::Seconds(300);  // runtime.timeouts.wait_seconds
  int64_t steps_done = 0;  // training steps completed (a resumed run starts at its checkpoint's)

  std::unique_ptr<Backend> backend;
  std::unique_ptr<StageChunks> chunks;
  std::unique_ptr<Dataset> dataset;       // first and last stages only
  std::unique_ptr<Dataset> eval_dataset;  // likewise, with an evaluation program
  std::unique_ptr<CheckpointSession> checkpoints;
  std::unique_ptr<DataChannel> channel;
  std::unique_ptr<CoordinatorGate> gate;
  std::unique_ptr<StageReduceGroups> reduce_groups;
  std::unique_ptr<StageExecutor> executor;
  std::unique_ptr<StageExecutor> evaluator;  // null without training.eval_every
};

// What BuildStage builds from; everything must outlive the stage.
struct StageInputs {
  const pb::Setup& setup;  // this rank's, without an error
  ControlChannel& control;
  MPI_Comm comm;
  const BackendRegistry& backends;
  const LayerRegistry& layers;
  const DataSourceRegistry* data_sources;
  const WorkerOptions& options;  // cuda_visible_devices, stop_requested
  const Logger& logger;
  TraceSession* trace;  // runtime.trace; null when not traced
};

// Builds `stage` in place, once. On failure what was built stays in `stage` until its owner (the
// session) ends, so nothing is torn down before the other ranks hear of the failure.
absl::Status BuildStage(const StageInputs& inputs, RankStage& stage);

// Waits (until the stage's timeout) for the all-gather of the parameters a sharded optimizer
// step left running (nothing without one): before the parameters are read outside a step (a
// checkpoint, an export, the end of the job).
absl::Status SettleParameters(RankStage& stage);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COORD_STAGE_BUILDER_H_

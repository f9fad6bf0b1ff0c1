// Backend: everything a stage needs that depends on the device kind the plan names
// (runtime.device), built once at start-up: the device, the data channel for its tensors, the
// data set as the device reads it, how a chunk's layers and optimizer run on it, and which
// setups it cannot run. The only code that knows concrete device types; exec/ and coord/ see
// this interface. Backends are registered in a BackendRegistry (backend_registry.h).
#ifndef GPIPE_RUNTIME_BACKEND_BACKEND_H_
#define GPIPE_RUNTIME_BACKEND_BACKEND_H_

#include <mpi.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/control.pb.h"
#include "proto/plan.pb.h"
#include "runtime/comm/data_channel.h"
#include "runtime/comm/wait.h"
#include "runtime/core/logger.h"
#include "runtime/data/dataset.h"
#include "runtime/device/device.h"
#include "runtime/exec/stage_chunks.h"

namespace gpipe {

// What a backend factory may need beyond the plan's runtime section: the job's processes (a GPU
// backend finds the ranks of its node through them) and where to say things once.
struct BackendContext {
  // The job's ranks; every rank builds its backend at the same point, so a factory may use it
  // collectively.
  MPI_Comm world = MPI_COMM_NULL;
  // Where start-up notes go; null: nowhere.
  const Logger* logger = nullptr;
  // The process's CUDA_VISIBLE_DEVICES as the launcher found it (nullopt: unset), quoted in
  // messages about missing GPUs; never used to choose one.
  std::optional<std::string> cuda_visible_devices;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // The stage's device; lives as long as the backend.
  virtual Device& device() = 0;
  // FAILED_PRECONDITION for what this backend cannot do with `setup`, saying what to do.
  virtual absl::Status CheckSetup(const pb::Setup& setup) const = 0;
  // The data set as the device reads it; null stays null.
  virtual std::unique_ptr<Dataset> AdaptDataset(std::unique_ptr<Dataset> dataset) const = 0;
  // The data channel between the ranks of `world` (see MpiDataChannel::Create); the backend
  // outlives it.
  virtual absl::StatusOr<std::unique_ptr<DataChannel>> CreateChannel(
      const pb::Plan& plan, MPI_Comm world, AbortPoller abort_poller,
      absl::Duration setup_timeout) = 0;
  // How a chunk's layers, loss and optimizer run on this device (see StageChunks::Create).
  virtual ChunkAdapter ChunkAdapterFor(const pb::Plan& plan) = 0;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_BACKEND_BACKEND_H_

// Stage backend: the device a worker's stage runs on, chosen by plan.runtime.device, and what
// that choice changes around it: the data source and the data channel. The worker asks here
// once at start-up, so device-specific wiring stays out of the step loop:
//   CPU  CpuDevice; the data set as opened; MpiDataChannel moving payloads.
//   SIM  SimDevice (shape-only tensors, ops that wait for their modelled time); the data set
//        wrapped as ShapeOnlyDataset; a headers-only MpiDataChannel whose transfers take the
//        link model's time, decorated by SimDataChannel (all-reduce from the link model).
#ifndef GPIPE_RUNTIME_COORD_STAGE_BACKEND_H_
#define GPIPE_RUNTIME_COORD_STAGE_BACKEND_H_

#include <mpi.h>

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/control.pb.h"
#include "proto/plan.pb.h"
#include "runtime/comm/data_channel.h"
#include "runtime/comm/wait.h"
#include "runtime/device/device.h"
#include "runtime/train/dataset.h"

namespace gpipe {

absl::StatusOr<std::unique_ptr<Device>> CreateStageDevice(const pb::Runtime& runtime);

// FAILED_PRECONDITION for what the device cannot do with this setup (a simulated device holds
// no parameter values, so it can neither start from --init-from nor --export).
absl::Status CheckStageSetup(const Device& device, const pb::Setup& setup);

// The data set as the device reads it; null stays null.
std::unique_ptr<Dataset> AdaptDataset(const Device& device, std::unique_ptr<Dataset> dataset);

// Collective over `world` (see MpiDataChannel::Create). `device` must outlive the channel.
absl::StatusOr<std::unique_ptr<DataChannel>> CreateStageChannel(Device& device,
                                                               const pb::Plan& plan,
                                                               MPI_Comm world,
                                                               AbortPoller abort_poller,
                                                               absl::Duration setup_timeout);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COORD_STAGE_BACKEND_H_

// The NCCL data channel of the CUDA backend (runtime.transport: NCCL), from the source CMake
// picks: nccl_channel_factory.cc where NCCL was found at build time, no_nccl_channel_factory.cc
// otherwise (which fails saying so). No #if in C++.
#ifndef GPIPE_RUNTIME_BACKEND_CUDA_NCCL_CHANNEL_FACTORY_H_
#define GPIPE_RUNTIME_BACKEND_CUDA_NCCL_CHANNEL_FACTORY_H_

#include <mpi.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/plan.pb.h"
#include "runtime/comm/data_channel.h"
#include "runtime/comm/wait.h"
#include "runtime/device/device.h"

namespace gpipe {

// Collective over `world`. `device` is the rank's CUDA device (GPU `ordinal` on host `host`);
// the channel links this rank with its replica's neighbouring stages, as the plan lays them out.
absl::StatusOr<std::unique_ptr<DataChannel>> CreateNcclChannel(const pb::Plan& plan, MPI_Comm world,
                                                               AbortPoller abort_poller,
                                                               absl::Duration setup_timeout,
                                                               Device& device, int ordinal,
                                                               const std::string& host);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_BACKEND_CUDA_NCCL_CHANNEL_FACTORY_H_

#include "runtime/coord/stage_backend.h"

#include "runtime/comm/mpi_data_channel.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/cpu/cpu_device.h"
#include "runtime/device/sim/sim_costs.h"
#include "runtime/device/sim/sim_data_channel.h"
#include "runtime/device/sim/sim_dataset.h"
#include "runtime/device/sim/sim_device.h"

namespace gpipe {

absl::StatusOr<std::unique_ptr<Device>> CreateStageDevice(const pb::Runtime& runtime) {
  switch (runtime.device()) {
    case pb::CPU:
      return std::make_unique<CpuDevice>(CpuDeviceOptions{
          .threads = runtime.threads(), .memory_limit_bytes = runtime.memory_limit_bytes()});
    case pb::SIM:
      return std::make_unique<SimDevice>(
          SimDeviceOptions{.memory_limit_bytes = runtime.memory_limit_bytes()});
  }
  return absl::InvalidArgumentError(
      absl::StrCat("runtime.device ", static_cast<int>(runtime.device()), " is not supported"));
}

absl::Status CheckStageSetup(const Device& device, const pb::Setup& setup) {
  if (device.kind() != DeviceKind::kSim) return absl::OkStatus();
  if (setup.has_init_from() || setup.export_parameters()) {
    return absl::FailedPreconditionError(
        "runtime.device SIM simulates tensors without values: --init-from and --export are not "
        "available; run the plan with device: CPU for them");
  }
  return absl::OkStatus();
}

std::unique_ptr<Dataset> AdaptDataset(const Device& device, std::unique_ptr<Dataset> dataset) {
  if (dataset == nullptr || device.kind() != DeviceKind::kSim) return dataset;
  return std::make_unique<ShapeOnlyDataset>(std::move(dataset));
}

absl::StatusOr<std::unique_ptr<DataChannel>> CreateStageChannel(Device& device,
                                                               const pb::Plan& plan,
                                                               MPI_Comm world,
                                                               AbortPoller abort_poller,
                                                               absl::Duration setup_timeout) {
  if (device.kind() != DeviceKind::kSim) {
    ASSIGN_OR_RETURN(std::unique_ptr<MpiDataChannel> channel,
                     MpiDataChannel::Create(world, std::move(abort_poller), nullptr,
                                            setup_timeout));
    return std::unique_ptr<DataChannel>(std::move(channel));
  }
  const int micro_batches = std::max(1, plan.pipeline().micro_batches());
  ASSIGN_OR_RETURN(SimCosts costs, SimCosts::Create(plan.runtime().sim(),
                                                    plan.training().global_batch() /
                                                        micro_batches));
  MpiDataChannelOptions options;
  options.headers_only = true;
  options.transfer_time = [costs](int64_t bytes) { return costs.Transfer(bytes); };
  ASSIGN_OR_RETURN(std::unique_ptr<MpiDataChannel> transport,
                   MpiDataChannel::Create(world, std::move(abort_poller), nullptr, setup_timeout,
                                          std::move(options)));
  return std::unique_ptr<DataChannel>(std::make_unique<SimDataChannel>(
      std::move(transport), static_cast<SimDevice&>(device), std::move(costs)));
}

}  // namespace gpipe

#include "runtime/backend/cpu/cpu_backend.h"

#include "runtime/backend/stage_memory_check.h"
#include "runtime/comm/mpi_data_channel.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/cpu/cpu_device.h"

namespace gpipe {
namespace {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const pb::Runtime& runtime)
      : device_(CpuDeviceOptions{.threads = runtime.threads(),
                                 .memory_limit_bytes = runtime.memory_limit_bytes()}) {}

  Device& device() override { return device_; }
  absl::Status CheckSetup(const pb::Setup& setup) const override {
    return CheckStageMemory(setup, HostMemoryBytes(), "the host's memory");
  }
  std::unique_ptr<Dataset> AdaptDataset(std::unique_ptr<Dataset> dataset) const override {
    return dataset;
  }
  absl::StatusOr<std::unique_ptr<DataChannel>> CreateChannel(
      const pb::Plan&, MPI_Comm world, AbortPoller abort_poller,
      absl::Duration setup_timeout) override {
    ASSIGN_OR_RETURN(
        std::unique_ptr<MpiDataChannel> channel,
        MpiDataChannel::Create(world, std::move(abort_poller), nullptr, setup_timeout));
    return std::unique_ptr<DataChannel>(std::move(channel));
  }
  ChunkAdapter ChunkAdapterFor(const pb::Plan&) override { return nullptr; }

 private:
  CpuDevice device_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const pb::Runtime& runtime,
                                                          const BackendContext&) {
  return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(runtime));
}

}  // namespace gpipe

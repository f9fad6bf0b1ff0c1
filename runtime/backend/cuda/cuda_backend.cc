#include "runtime/backend/cuda/cuda_backend.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/backend/cuda/gpu_selection.h"
#include "runtime/backend/cuda/nccl_channel_factory.h"
#include "runtime/backend/stage_memory_check.h"
#include "runtime/comm/host_staged_data_channel.h"
#include "runtime/comm/mpi_data_channel.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/cuda/cuda_device.h"

namespace gpipe {
namespace {

class CudaBackend final : public Backend {
 public:
  CudaBackend(std::unique_ptr<Device> device, int ordinal, std::string host)
      : device_(std::move(device)), ordinal_(ordinal), host_(std::move(host)) {}

  Device& device() override { return *device_; }
  absl::Status CheckSetup(const pb::Setup& setup) const override {
    ASSIGN_OR_RETURN(const int64_t capacity, TotalMemoryOf(ordinal_));
    return CheckStageMemory(setup, capacity, absl::StrCat("GPU ", ordinal_, "'s memory"));
  }
  std::unique_ptr<Dataset> AdaptDataset(std::unique_ptr<Dataset> dataset) const override {
    return dataset;
  }
  absl::StatusOr<std::unique_ptr<DataChannel>> CreateChannel(
      const pb::Plan& plan, MPI_Comm world, AbortPoller abort_poller,
      absl::Duration setup_timeout) override {
    if (plan.runtime().transport() == pb::NCCL) {
      return CreateNcclChannel(plan, world, std::move(abort_poller), setup_timeout, *device_,
                               ordinal_, host_);
    }
    ASSIGN_OR_RETURN(
        std::unique_ptr<MpiDataChannel> host_channel,
        MpiDataChannel::Create(world, std::move(abort_poller), nullptr, setup_timeout));
    return std::unique_ptr<DataChannel>(
        std::make_unique<HostStagedDataChannel>(std::move(host_channel), *device_));
  }
  ChunkAdapter ChunkAdapterFor(const pb::Plan&) override { return nullptr; }

 private:
  std::unique_ptr<Device> device_;
  int ordinal_;       // the GPU's CUDA device id
  std::string host_;  // MPI's processor name
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const pb::Runtime& runtime,
                                                           const BackendContext& context) {
  ASSIGN_OR_RETURN(const NodeRanks node, NodeRanksOf(context.world));
  const int visible_gpus = VisibleGpuCount();
  ASSIGN_OR_RETURN(const GpuChoice gpu, SelectGpu(node, visible_gpus, runtime.cuda().share_gpu(),
                                                  context.cuda_visible_devices));
  if (gpu.shared && node.local_rank == 0 && context.logger != nullptr) {
    context.logger->Info(absl::StrCat("runtime.cuda.share_gpu: host ", node.host, " runs ",
                                      node.local_size, " ranks on ", visible_gpus,
                                      " GPU(s), shared round-robin; they run their work in turn"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Device> device,
                   CreateCudaDevice(CudaDeviceOptions{
                       .ordinal = gpu.ordinal,
                       .memory_limit_bytes = runtime.memory_limit_bytes(),
                       .allow_tf32 = runtime.cuda().allow_tf32(),
                       .measure_conv_algorithms = runtime.cuda().measure_conv_algorithms(),
                       .cublaslt_gemm = runtime.cuda().cublaslt_gemm(),
                       .cudnn_attention = runtime.cuda().cudnn_attention(),
                   }));
  return std::unique_ptr<Backend>(
      std::make_unique<CudaBackend>(std::move(device), gpu.ordinal, node.host));
}

}  // namespace gpipe

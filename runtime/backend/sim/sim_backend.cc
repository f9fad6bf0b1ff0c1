#include "runtime/backend/sim/sim_backend.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/backend/sim/sim_data_channel.h"
#include "runtime/backend/sim/sim_dataset.h"
#include "runtime/backend/sim/sim_layer.h"
#include "runtime/backend/sim/sim_loss.h"
#include "runtime/backend/sim/sim_optimizer.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/sim/sim_device.h"
#include "runtime/estimate/sim_costs.h"

namespace gpipe {
namespace {

// The cost table of `plan`, for its micro-batch size.
absl::StatusOr<SimCosts> CostsOf(const pb::Plan& plan) {
  // One replica's micro-batch (see MicroBatchSize in runtime/plan/analyzed_plan.h).
  const int64_t parts = int64_t{std::max(1, plan.pipeline().micro_batches())} *
                        std::max(1, plan.pipeline().data_parallel());
  return SimCosts::Create(plan.runtime().sim(), plan.training().global_batch() / parts);
}

class SimBackend final : public Backend {
 public:
  explicit SimBackend(const pb::Runtime& runtime)
      : device_(SimDeviceOptions{.memory_limit_bytes = runtime.memory_limit_bytes(),
                                 .host_link_gbps = runtime.sim().host_link_gbps()}) {}

  Device& device() override { return device_; }

  absl::Status CheckSetup(const pb::Setup& setup) const override {
    if (setup.has_init_from() || setup.export_parameters()) {
      return absl::FailedPreconditionError(
          "runtime.device SIM simulates tensors without values: --init-from and --export are "
          "not available; run the plan with device: CPU for them");
    }
    return absl::OkStatus();
  }

  std::unique_ptr<Dataset> AdaptDataset(std::unique_ptr<Dataset> dataset) const override {
    if (dataset == nullptr) return dataset;
    return std::make_unique<ShapeOnlyDataset>(std::move(dataset));
  }

  absl::StatusOr<std::unique_ptr<DataChannel>> CreateChannel(
      const pb::Plan& plan, MPI_Comm world, AbortPoller abort_poller,
      absl::Duration setup_timeout) override {
    ASSIGN_OR_RETURN(SimCosts costs, CostsOf(plan));
    ASSIGN_OR_RETURN(
        std::unique_ptr<SimDataChannel> channel,
        SimDataChannel::Create(world, std::move(abort_poller), setup_timeout, std::move(costs)));
    return std::unique_ptr<DataChannel>(std::move(channel));
  }

  // Layers, loss and optimizer become shape-only stand-ins that wait for their modelled time.
  ChunkAdapter ChunkAdapterFor(const pb::Plan& plan) override {
    return [this, &plan](StageModel& model, std::unique_ptr<Optimizer>& optimizer) -> absl::Status {
      ASSIGN_OR_RETURN(const SimCosts costs, CostsOf(plan));
      model.Decorate(
          [&](std::unique_ptr<Layer> layer, int) -> std::unique_ptr<Layer> {
            const SimOpTimes times = costs.ForLayer(layer->name(), layer->ForwardFlopsPerSample());
            return std::make_unique<SimLayer>(std::move(layer), device_, times);
          },
          [&](std::unique_ptr<Loss> loss) -> std::unique_ptr<Loss> {
            return std::make_unique<SimLoss>(std::move(loss), device_, costs.loss());
          });
      optimizer = std::make_unique<SimOptimizer>(
          std::move(optimizer), device_, OptimizerStatePerParameter(plan.training().optimizer()),
          costs.optimizer());
      return absl::OkStatus();
    };
  }

 private:
  SimDevice device_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateSimBackend(const pb::Runtime& runtime,
                                                          const BackendContext&) {
  return std::unique_ptr<Backend>(std::make_unique<SimBackend>(runtime));
}

}  // namespace gpipe

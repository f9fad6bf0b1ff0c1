#include "runtime/exec/stage_chunks.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/sim/sim_costs.h"
#include "runtime/device/sim/sim_device.h"
#include "runtime/device/sim/sim_layer.h"
#include "runtime/device/sim/sim_loss.h"
#include "runtime/device/sim/sim_optimizer.h"

namespace gpipe {
namespace {

// On a simulated device (runtime { device: SIM }) the chunk's layers, loss and optimizer become
// shape-only stand-ins that wait for their modelled time; the rest of the runtime is unchanged.
void Simulate(SimDevice& device, const SimCosts& costs, const pb::Plan& plan, StageModel& model,
              std::unique_ptr<Optimizer>& optimizer) {
  model.Decorate(
      [&](std::unique_ptr<Layer> layer, int) -> std::unique_ptr<Layer> {
        const SimOpTimes times = costs.ForLayer(layer->name(), layer->ForwardFlopsPerSample());
        return std::make_unique<SimLayer>(std::move(layer), device, times);
      },
      [&](std::unique_ptr<Loss> loss) -> std::unique_ptr<Loss> {
        return std::make_unique<SimLoss>(std::move(loss), device, costs.loss());
      });
  optimizer = std::make_unique<SimOptimizer>(
      std::move(optimizer), device, OptimizerStatePerParameter(plan.training().optimizer()),
      costs.optimizer());
}

}  // namespace

absl::StatusOr<StageChunks> StageChunks::Create(Device& device, const pb::Plan& plan,
                                                const std::vector<ChunkSpec>& specs,
                                                const LayerRegistry& registry,
                                                std::span<const pb::TieGroup> ties) {
  if (specs.empty()) return absl::InvalidArgumentError("a stage needs at least one chunk");
  std::optional<SimCosts> sim_costs;
  if (device.kind() == DeviceKind::kSim) {
    const int micro_batches = std::max(1, plan.pipeline().micro_batches());
    ASSIGN_OR_RETURN(sim_costs, SimCosts::Create(plan.runtime().sim(),
                                                 plan.training().global_batch() / micro_batches));
  }
  StageChunks chunks;
  for (size_t c = 0; c < specs.size(); ++c) {
    const ChunkSpec& spec = specs[c];
    auto model = StageModel::Create(plan.model(), spec.first_layer, spec.end_layer,
                                    spec.input_shape, registry);
    if (!model.ok()) return WithContext(model.status(), absl::StrCat("chunk ", c));
    chunks.models_.push_back(std::make_unique<StageModel>(*std::move(model)));
    ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer,
                     CreateOptimizer(plan.training().optimizer()));
    if (sim_costs.has_value()) {
      Simulate(static_cast<SimDevice&>(device), *sim_costs, plan, *chunks.models_.back(),
               optimizer);
    }
    ASSIGN_OR_RETURN(ParameterStore store, ParameterStore::Create(device, *chunks.models_.back(),
                                                                  plan.training().seed(), ties));
    chunks.parameters_.push_back(std::make_unique<ParameterStore>(std::move(store)));
    chunks.optimizers_.push_back(std::move(optimizer));
  }
  return chunks;
}

std::vector<ChunkSpec> StageChunks::SpecsForStage(const std::vector<pb::StageSpec>& parts,
                                                  int stage, int stages) {
  std::vector<ChunkSpec> specs;
  for (size_t part = stage; part < parts.size(); part += stages) {
    const pb::StageSpec& p = parts[part];
    specs.push_back({.first_layer = p.first_layer(),
                     .end_layer = p.end_layer(),
                     .input_shape = Shape(
                         std::vector<int64_t>(p.input_shape().begin(), p.input_shape().end()))});
  }
  return specs;
}

std::vector<ChunkRefs> StageChunks::refs() {
  std::vector<ChunkRefs> out;
  for (size_t c = 0; c < models_.size(); ++c) {
    out.push_back({models_[c].get(), parameters_[c].get(), optimizers_[c].get()});
  }
  return out;
}

std::vector<NamedTensorData> StageChunks::Export() const {
  std::vector<NamedTensorData> all;
  for (const auto& store : parameters_) {
    std::vector<NamedTensorData> part = store->Export();
    for (NamedTensorData& t : part) all.push_back(std::move(t));
  }
  return all;
}

absl::Status StageChunks::Import(const std::vector<NamedTensorData>& tensors) {
  for (size_t c = 0; c < parameters_.size(); ++c) {
    RETURN_IF_ERROR(parameters_[c]->Import(tensors));
  }
  return absl::OkStatus();
}

}  // namespace gpipe

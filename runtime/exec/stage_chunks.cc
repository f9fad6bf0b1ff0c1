#include "runtime/exec/stage_chunks.h"

#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/exec/bf16_layer.h"
#include "runtime/exec/bf16_loss.h"
#include "runtime/train/optimizer_factory.h"
#include "runtime/train/optimizer_state_io.h"
#include "runtime/train/sharded_optimizer.h"

namespace gpipe {

absl::StatusOr<StageChunks> StageChunks::Create(Device& device, const pb::Plan& plan,
                                                const std::vector<ChunkSpec>& specs,
                                                const LayerRegistry& registry,
                                                std::span<const pb::TieGroup> ties,
                                                const ChunkAdapter& adapter, int replica) {
  if (specs.empty()) return absl::InvalidArgumentError("a stage needs at least one chunk");
  StageChunks chunks;
  const int replicas = plan.pipeline().data_parallel();
  if (plan.training().shard_optimizer_state() && replicas > 1) {
    if (replica < 0 || replica >= replicas) {
      return absl::InvalidArgumentError(
          absl::StrCat("replica ", replica, " of ", replicas, " sharding the optimizer state"));
    }
    chunks.replica_ = replica;
    chunks.replicas_ = replicas;
  }
  for (size_t c = 0; c < specs.size(); ++c) {
    const ChunkSpec& spec = specs[c];
    auto model = StageModel::Create(plan.model(), spec.first_layer, spec.end_layer,
                                    spec.input_shape, registry);
    if (!model.ok()) return WithContext(model.status(), absl::StrCat("chunk ", c));
    chunks.models_.push_back(std::make_unique<StageModel>(*std::move(model)));
    if (plan.training().precision() == pb::BF16) {
      // Before the backend's adapter, which may replace the layers by stand-ins.
      chunks.models_.back()->Decorate(
          [](std::unique_ptr<Layer> layer, int) {
            return std::unique_ptr<Layer>(std::make_unique<Bf16Layer>(std::move(layer)));
          },
          [](std::unique_ptr<Loss> loss) {
            return std::unique_ptr<Loss>(std::make_unique<Bf16Loss>(std::move(loss)));
          });
    }
    ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer,
                     CreateOptimizer(plan.training().optimizer()));
    if (adapter != nullptr) {
      RETURN_IF_ERROR(
          WithContext(adapter(*chunks.models_.back(), optimizer), absl::StrCat("chunk ", c)));
    }
    if (chunks.replicas_ > 1) {
      optimizer =
          std::make_unique<ShardedOptimizer>(std::move(optimizer), replica, chunks.replicas_);
    }
    ASSIGN_OR_RETURN(
        ParameterStore store,
        ParameterStore::Create(device, *chunks.models_.back(), plan.training().seed(), ties,
                               /*bf16_product_copies=*/plan.training().precision() == pb::BF16));
    chunks.parameters_.push_back(std::make_unique<ParameterStore>(std::move(store)));
    chunks.optimizers_.push_back(std::move(optimizer));
  }
  return chunks;
}

std::vector<ChunkSpec> StageChunks::SpecsForStage(const std::vector<pb::StageSpec>& parts,
                                                  int stage, const schedule::Topology& topology) {
  std::vector<ChunkSpec> specs;
  for (int chunk = 0; chunk < topology.chunks; ++chunk) {
    const size_t part = topology.VirtualStage({stage, chunk});
    if (part >= parts.size()) break;
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

std::vector<ParameterSlot> StageChunks::SlotsOf(const std::string& name) const {
  std::vector<ParameterSlot> slots;
  for (size_t c = 0; c < parameters_.size(); ++c) {
    const std::vector<std::string>& names = parameters_[c]->names();
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == name) slots.push_back({static_cast<int>(c), static_cast<int>(i)});
    }
  }
  return slots;
}

absl::StatusOr<std::vector<NamedTensorData>> StageChunks::Export() const {
  std::vector<NamedTensorData> all;
  for (const auto& store : parameters_) {
    ASSIGN_OR_RETURN(std::vector<NamedTensorData> part, store->Export());
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

std::vector<ElementRange> StageChunks::OptimizerParts(int chunk) const {
  if (replicas_ == 1) return {};
  return ReplicaParts(parameters_[chunk]->values(), replica_, replicas_);
}

absl::StatusOr<StageChunks::SavedTensors> StageChunks::SaveState(bool with_values) const {
  SavedTensors saved;
  const auto add = [&](NamedTensorData tensor, std::vector<int64_t> whole_shape,
                       pb::CheckpointTensor::Kind kind, std::optional<ElementRange> part) {
    pb::CheckpointTensor& entry = saved.entries.emplace_back();
    entry.set_name(tensor.name);
    for (int64_t d : whole_shape) entry.add_shape(d);
    entry.set_kind(kind);
    if (part.has_value()) {
      entry.set_element_begin(part->begin);
      entry.set_element_end(part->end);
    }
    saved.tensors.push_back(std::move(tensor));
  };
  for (size_t c = 0; c < parameters_.size(); ++c) {
    const ParameterStore& store = *parameters_[c];
    if (with_values) {
      ASSIGN_OR_RETURN(std::vector<NamedTensorData> values, store.Export());
      for (size_t i = 0; i < values.size(); ++i) {
        std::vector<int64_t> shape = values[i].shape;
        add(std::move(values[i]), std::move(shape),
            i < store.names().size() ? pb::CheckpointTensor::PARAMETER
                                     : pb::CheckpointTensor::BUFFER,
            std::nullopt);
      }
    }
    const std::vector<ElementRange> parts = OptimizerParts(static_cast<int>(c));
    ASSIGN_OR_RETURN(std::vector<ExportedState> state,
                     ExportOptimizerState(store.device(), *optimizers_[c], store.names(),
                                          store.values(), parts));
    for (ExportedState& t : state) {
      add(std::move(t.tensor), std::move(t.whole_shape), pb::CheckpointTensor::OPTIMIZER_STATE,
          t.part);
    }
  }
  return saved;
}

std::vector<std::string> StageChunks::StateNames(int64_t optimizer_steps) const {
  std::vector<std::string> names;
  for (size_t c = 0; c < parameters_.size(); ++c) {
    const ParameterStore& store = *parameters_[c];
    names.insert(names.end(), store.names().begin(), store.names().end());
    names.insert(names.end(), store.buffer_names().begin(), store.buffer_names().end());
    if (optimizer_steps > 0) {
      for (std::string& name : OptimizerStateNames(*optimizers_[c], store.names())) {
        names.push_back(std::move(name));
      }
    }
  }
  return names;
}

absl::Status StageChunks::RestoreState(const std::vector<NamedTensorData>& tensors,
                                       int64_t optimizer_steps) {
  absl::flat_hash_map<std::string, const NamedTensorData*> by_name;
  for (const NamedTensorData& t : tensors) by_name.emplace(t.name, &t);
  for (size_t c = 0; c < parameters_.size(); ++c) {
    ParameterStore& store = *parameters_[c];
    // Parameters first: a model that differs is reported as such, not as odd optimizer state.
    RETURN_IF_ERROR(store.Import(tensors));
    RETURN_IF_ERROR(ImportOptimizerState(store.device(), *optimizers_[c], optimizer_steps,
                                         store.names(), store.values(), by_name,
                                         OptimizerParts(static_cast<int>(c))));
  }
  return absl::OkStatus();
}

}  // namespace gpipe

#include "runtime/exec/parameter_store.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "layers/parameter_init.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"

namespace gpipe {

absl::StatusOr<ParameterStore> ParameterStore::Create(Device& device, const StageModel& model,
                                                      uint64_t seed,
                                                      std::span<const pb::TieGroup> ties,
                                                      bool bf16_product_copies) {
  absl::flat_hash_map<std::string, const pb::TieGroup*> tie_of;
  for (const pb::TieGroup& tie : ties) {
    for (const std::string& name : tie.parameters()) tie_of[name] = &tie;
  }
  ParameterStore store(device);
  store.layer_offsets_.push_back(0);
  store.buffer_offsets_.push_back(0);
  for (int l = 0; l < model.num_layers(); ++l) {
    const Layer& layer = model.layer(l);
    const std::vector<ParamSpec> specs = layer.parameter_specs();
    for (int p = 0; p < static_cast<int>(specs.size()); ++p) {
      ASSIGN_OR_RETURN(Tensor value,
                       Tensor::Empty(device, specs[p].shape, DType::kF32, MemoryKind::kParameter));
      const std::string name = absl::StrCat(layer.name(), ".", specs[p].name);
      if (auto tie = tie_of.find(name); tie != tie_of.end()) {
        ParamSpec first = specs[p];
        first.init = static_cast<ParamInit>(tie->second->init_kind());
        first.bound = tie->second->init_bound();
        RETURN_IF_ERROR(InitializeParameter(device, first, seed, tie->second->init_layer(),
                                            tie->second->init_parameter(), value));
      } else {
        RETURN_IF_ERROR(
            InitializeParameter(device, specs[p], seed, model.global_index(l), p, value));
      }
      ASSIGN_OR_RETURN(Tensor grad,
                       Tensor::Empty(device, specs[p].shape, DType::kF32, MemoryKind::kGradient));
      RETURN_IF_ERROR(device.ops().tensor.Fill(grad, 0.0));
      Tensor copy;
      if (bf16_product_copies && specs[p].product_operand) {
        ASSIGN_OR_RETURN(
            copy, Tensor::Empty(device, specs[p].shape, DType::kBF16, MemoryKind::kParameter));
      }
      store.operands_.push_back(copy.defined() ? copy : value);
      store.copies_.push_back(std::move(copy));
      store.values_.push_back(std::move(value));
      store.grads_.push_back(std::move(grad));
      store.names_.push_back(name);
    }
    store.layer_offsets_.push_back(store.values_.size());
    store.copies_stale_.push_back(true);
    const std::vector<ParamSpec> buffer_specs = layer.buffer_specs();
    for (int b = 0; b < static_cast<int>(buffer_specs.size()); ++b) {
      ASSIGN_OR_RETURN(Tensor value, Tensor::Empty(device, buffer_specs[b].shape, DType::kF32,
                                                   MemoryKind::kParameter));
      RETURN_IF_ERROR(InitializeParameter(device, buffer_specs[b], seed, model.global_index(l),
                                          static_cast<int>(specs.size()) + b, value));
      store.buffers_.push_back(std::move(value));
      store.buffer_names_.push_back(absl::StrCat(layer.name(), ".", buffer_specs[b].name));
    }
    store.buffer_offsets_.push_back(store.buffers_.size());
  }
  return store;
}

std::span<Tensor> ParameterStore::buffers_of(int local_layer) {
  const size_t begin = buffer_offsets_[local_layer];
  return std::span<Tensor>(buffers_).subspan(begin, buffer_offsets_[local_layer + 1] - begin);
}

std::span<const Tensor> ParameterStore::values_of(int local_layer) const {
  const size_t begin = layer_offsets_[local_layer];
  return std::span<const Tensor>(values_).subspan(begin, layer_offsets_[local_layer + 1] - begin);
}

absl::StatusOr<std::span<const Tensor>> ParameterStore::ProductOperandsOf(int local_layer) {
  const size_t begin = layer_offsets_[local_layer];
  const size_t end = layer_offsets_[local_layer + 1];
  if (copies_stale_[local_layer]) {
    for (size_t i = begin; i < end; ++i) {
      if (copies_[i].defined()) RETURN_IF_ERROR(device_->ops().tensor.Cast(values_[i], copies_[i]));
    }
    copies_stale_[local_layer] = false;
  }
  return std::span<const Tensor>(operands_).subspan(begin, end - begin);
}

std::span<Tensor> ParameterStore::grads_of(int local_layer) {
  const size_t begin = layer_offsets_[local_layer];
  return std::span<Tensor>(grads_).subspan(begin, layer_offsets_[local_layer + 1] - begin);
}

absl::Status ParameterStore::ZeroGrads() {
  for (Tensor& g : grads_) RETURN_IF_ERROR(device_->ops().tensor.Fill(g, 0.0));
  return absl::OkStatus();
}

absl::Status ParameterStore::FlagNonFiniteGrads(Tensor& flag) const {
  return device_->ops().tensor.FlagNonFinite(grads_, flag);
}

absl::StatusOr<std::vector<NamedTensorData>> ParameterStore::Export() const {
  std::vector<NamedTensorData> out;
  out.reserve(values_.size() + buffers_.size());
  const auto add = [&](const std::string& name, const Tensor& tensor) -> absl::Status {
    std::vector<float> values(tensor.num_elements());
    RETURN_IF_ERROR(WithContext(
        device_->CopyToHost(tensor, values.data(), static_cast<int64_t>(values.size() * 4)),
        absl::StrCat("exporting '", name, "'")));
    out.push_back({name, tensor.shape().dims(), std::move(values)});
    return absl::OkStatus();
  };
  for (size_t i = 0; i < values_.size(); ++i) RETURN_IF_ERROR(add(names_[i], values_[i]));
  for (size_t i = 0; i < buffers_.size(); ++i) RETURN_IF_ERROR(add(buffer_names_[i], buffers_[i]));
  return out;
}

absl::Status ParameterStore::Import(const std::vector<NamedTensorData>& tensors) {
  absl::flat_hash_map<std::string, const NamedTensorData*> by_name;
  for (const NamedTensorData& t : tensors) by_name[t.name] = &t;
  // Everything is checked before anything is overwritten: a bad file changes nothing.
  const auto find = [&by_name](const char* what, const std::string& name,
                               const Tensor& into) -> absl::StatusOr<const NamedTensorData*> {
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      return absl::NotFoundError(absl::StrCat(what, " '", name, "' is missing"));
    }
    if (Shape(it->second->shape) != into.shape()) {
      return absl::InvalidArgumentError(absl::StrCat(what, " '", name, "' has shape ",
                                                     Shape(it->second->shape).ToString(),
                                                     ", expected ", into.shape().ToString()));
    }
    return it->second;
  };
  std::vector<std::pair<const NamedTensorData*, Tensor*>> copies;
  for (size_t i = 0; i < values_.size(); ++i) {
    ASSIGN_OR_RETURN(const NamedTensorData* t, find("parameter", names_[i], values_[i]));
    copies.emplace_back(t, &values_[i]);
  }
  for (size_t i = 0; i < buffers_.size(); ++i) {
    ASSIGN_OR_RETURN(const NamedTensorData* t, find("buffer", buffer_names_[i], buffers_[i]));
    copies.emplace_back(t, &buffers_[i]);
  }
  copies_stale_.assign(copies_stale_.size(), true);
  for (const auto& [t, into] : copies) {
    RETURN_IF_ERROR(WithContext(
        device_->CopyFromHost(t->values.data(),
                              static_cast<int64_t>(t->values.size() * sizeof(float)), *into),
        absl::StrCat("importing '", t->name, "'")));
  }
  return absl::OkStatus();
}

}  // namespace gpipe

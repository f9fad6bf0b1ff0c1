#include "runtime/exec/parameter_store.h"

#include <cmath>
#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "layers/parameter_init.h"
#include "runtime/core/status_macros.h"

namespace gpipe {

absl::StatusOr<ParameterStore> ParameterStore::Create(Device& device, const StageModel& model,
                                                      uint64_t seed) {
  ParameterStore store;
  store.layer_offsets_.push_back(0);
  for (int l = 0; l < model.num_layers(); ++l) {
    const Layer& layer = model.layer(l);
    const std::vector<ParamSpec> specs = layer.parameter_specs();
    for (int p = 0; p < static_cast<int>(specs.size()); ++p) {
      ASSIGN_OR_RETURN(Tensor value,
                       Tensor::Empty(device, specs[p].shape, DType::kF32, MemoryKind::kParameter));
      RETURN_IF_ERROR(InitializeParameter(specs[p], seed, model.global_index(l), p, value));
      ASSIGN_OR_RETURN(Tensor grad,
                       Tensor::Zeros(device, specs[p].shape, DType::kF32, MemoryKind::kGradient));
      store.values_.push_back(std::move(value));
      store.grads_.push_back(std::move(grad));
      store.names_.push_back(absl::StrCat(layer.name(), ".", specs[p].name));
    }
    store.layer_offsets_.push_back(store.values_.size());
  }
  return store;
}

std::span<const Tensor> ParameterStore::values_of(int local_layer) const {
  const size_t begin = layer_offsets_[local_layer];
  return std::span<const Tensor>(values_).subspan(begin, layer_offsets_[local_layer + 1] - begin);
}

std::span<Tensor> ParameterStore::grads_of(int local_layer) {
  const size_t begin = layer_offsets_[local_layer];
  return std::span<Tensor>(grads_).subspan(begin, layer_offsets_[local_layer + 1] - begin);
}

void ParameterStore::ZeroGrads() {
  for (Tensor& g : grads_) g.SetZero();
}

bool ParameterStore::GradsFinite() const {
  for (const Tensor& g : grads_) {
    for (float v : g.f32_span()) {
      if (!std::isfinite(v)) return false;
    }
  }
  return true;
}

std::vector<NamedTensorData> ParameterStore::Export() const {
  std::vector<NamedTensorData> out;
  out.reserve(values_.size());
  for (size_t i = 0; i < values_.size(); ++i) {
    const auto span = values_[i].f32_span();
    out.push_back(
        {names_[i], values_[i].shape().dims(), std::vector<float>(span.begin(), span.end())});
  }
  return out;
}

absl::Status ParameterStore::Import(const std::vector<NamedTensorData>& tensors) {
  absl::flat_hash_map<std::string, const NamedTensorData*> by_name;
  for (const NamedTensorData& t : tensors) by_name[t.name] = &t;
  for (size_t i = 0; i < values_.size(); ++i) {
    auto it = by_name.find(names_[i]);
    if (it == by_name.end()) {
      return absl::NotFoundError(absl::StrCat("parameter '", names_[i], "' is missing"));
    }
    const NamedTensorData& t = *it->second;
    if (Shape(t.shape) != values_[i].shape()) {
      return absl::InvalidArgumentError(absl::StrCat("parameter '", names_[i], "' has shape ",
                                                     Shape(t.shape).ToString(), ", expected ",
                                                     values_[i].shape().ToString()));
    }
    std::memcpy(values_[i].f32(), t.values.data(), t.values.size() * sizeof(float));
  }
  return absl::OkStatus();
}

}  // namespace gpipe

#include "runtime/train/optimizer_state_io.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

std::string StateName(const std::string& parameter, const std::string& key) {
  return absl::StrCat(parameter, ":", key);
}

}  // namespace

std::vector<std::string> OptimizerStateNames(const Optimizer& optimizer,
                                             std::span<const std::string> names) {
  const std::vector<std::string> keys = optimizer.StateKeys();
  std::vector<std::string> out;
  out.reserve(names.size() * keys.size());
  for (const std::string& name : names) {
    for (const std::string& key : keys) out.push_back(StateName(name, key));
  }
  return out;
}

absl::StatusOr<std::vector<NamedTensorData>> ExportOptimizerState(
    Device& device, const Optimizer& optimizer, std::span<const std::string> names) {
  const std::vector<std::string> keys = optimizer.StateKeys();
  std::vector<NamedTensorData> out;
  for (size_t k = 0; k < keys.size(); ++k) {
    const std::span<const Tensor> state = optimizer.State(static_cast<int>(k));
    if (state.empty()) continue;  // before the first Step
    if (state.size() != names.size()) {
      return absl::InternalError(absl::StrCat("the optimizer keeps ", state.size(), " ", keys[k],
                                              " tensors for ", names.size(), " parameters"));
    }
  }
  for (size_t i = 0; i < names.size(); ++i) {
    for (size_t k = 0; k < keys.size(); ++k) {
      const std::span<const Tensor> state = optimizer.State(static_cast<int>(k));
      if (state.empty()) continue;
      const Tensor& tensor = state[i];
      NamedTensorData data{StateName(names[i], keys[k]), tensor.shape().dims(),
                           std::vector<float>(tensor.num_elements())};
      RETURN_IF_ERROR(
          WithContext(device.CopyToHost(tensor, data.values.data(),
                                        static_cast<int64_t>(data.values.size() * sizeof(float))),
                      absl::StrCat("saving '", data.name, "'")));
      out.push_back(std::move(data));
    }
  }
  return out;
}

absl::Status ImportOptimizerState(
    Device& device, Optimizer& optimizer, int64_t steps, std::span<const std::string> names,
    std::span<const Tensor> values,
    const absl::flat_hash_map<std::string, const NamedTensorData*>& tensors) {
  const std::vector<std::string> keys = optimizer.StateKeys();
  std::vector<std::vector<Tensor>> state(keys.size());
  if (steps > 0) {
    // Everything is found and checked before anything is allocated or copied.
    std::vector<std::vector<const NamedTensorData*>> sources(keys.size());
    for (size_t k = 0; k < keys.size(); ++k) {
      for (size_t i = 0; i < names.size(); ++i) {
        const std::string name = StateName(names[i], keys[k]);
        const auto it = tensors.find(name);
        if (it == tensors.end()) {
          return absl::NotFoundError(absl::StrCat("optimizer state '", name, "' is missing"));
        }
        if (Shape(it->second->shape) != values[i].shape()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "optimizer state '", name, "' has shape ", Shape(it->second->shape).ToString(),
              ", its parameter ", values[i].shape().ToString()));
        }
        sources[k].push_back(it->second);
      }
    }
    for (size_t k = 0; k < keys.size(); ++k) {
      for (size_t i = 0; i < names.size(); ++i) {
        ASSIGN_OR_RETURN(Tensor tensor, Tensor::Empty(device, values[i].shape(), DType::kF32,
                                                      MemoryKind::kOptimizerState));
        const NamedTensorData& source = *sources[k][i];
        RETURN_IF_ERROR(WithContext(
            device.CopyFromHost(source.values.data(),
                                static_cast<int64_t>(source.values.size() * sizeof(float)), tensor),
            absl::StrCat("restoring '", source.name, "'")));
        state[k].push_back(std::move(tensor));
      }
    }
  }
  return optimizer.Restore(steps, std::move(state));
}

}  // namespace gpipe

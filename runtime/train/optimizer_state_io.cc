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

absl::StatusOr<std::vector<ExportedState>> ExportOptimizerState(
    Device& device, const Optimizer& optimizer, std::span<const std::string> names,
    std::span<const Tensor> values, std::span<const ElementRange> parts) {
  const std::vector<std::string> keys = optimizer.StateKeys();
  if (values.size() != names.size() || (!parts.empty() && parts.size() != names.size())) {
    return absl::InternalError(absl::StrCat("exporting the optimizer state of ", names.size(),
                                            " named parameters with ", values.size(),
                                            " values and ", parts.size(), " parts"));
  }
  for (size_t k = 0; k < keys.size(); ++k) {
    const std::span<const Tensor> state = optimizer.State(static_cast<int>(k));
    if (state.empty()) continue;  // before the first Step
    if (state.size() != names.size()) {
      return absl::InternalError(absl::StrCat("the optimizer keeps ", state.size(), " ", keys[k],
                                              " tensors for ", names.size(), " parameters"));
    }
  }
  std::vector<ExportedState> out;
  for (size_t i = 0; i < names.size(); ++i) {
    for (size_t k = 0; k < keys.size(); ++k) {
      const std::span<const Tensor> state = optimizer.State(static_cast<int>(k));
      if (state.empty()) continue;
      const Tensor& tensor = state[i];
      if (!parts.empty() && parts[i].empty()) continue;  // the part of another replica
      const int64_t expected = parts.empty() ? values[i].num_elements() : parts[i].size();
      if (!tensor.defined() || tensor.num_elements() != expected) {
        return absl::InternalError(absl::StrCat("the optimizer's ", keys[k], " of '", names[i],
                                                "' is ", tensor.DebugString(), ", expected ",
                                                expected, " elements"));
      }
      ExportedState exported{
          .tensor = {StateName(names[i], keys[k]),
                     parts.empty() ? tensor.shape().dims() : std::vector<int64_t>{expected},
                     std::vector<float>(expected)},
          .whole_shape = values[i].shape().dims()};
      if (!parts.empty()) exported.part = parts[i];
      RETURN_IF_ERROR(WithContext(
          device.CopyToHost(tensor, exported.tensor.values.data(),
                            static_cast<int64_t>(exported.tensor.values.size() * sizeof(float))),
          absl::StrCat("saving '", exported.tensor.name, "'")));
      out.push_back(std::move(exported));
    }
  }
  return out;
}

absl::Status ImportOptimizerState(
    Device& device, Optimizer& optimizer, int64_t steps, std::span<const std::string> names,
    std::span<const Tensor> values,
    const absl::flat_hash_map<std::string, const NamedTensorData*>& tensors,
    std::span<const ElementRange> parts) {
  if (!parts.empty() && parts.size() != names.size()) {
    return absl::InternalError(absl::StrCat("importing the optimizer state of ", names.size(),
                                            " parameters with ", parts.size(), " parts"));
  }
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
        const NamedTensorData& source = *sources[k][i];
        const ElementRange part =
            parts.empty() ? ElementRange{0, values[i].num_elements()} : parts[i];
        if (part.empty()) {
          state[k].emplace_back();  // another replica's
          continue;
        }
        Shape shape = values[i].shape();
        if (!parts.empty()) {
          ASSIGN_OR_RETURN(const Tensor view, ElementView(values[i], part));
          shape = view.shape();
        }
        ASSIGN_OR_RETURN(Tensor tensor,
                         Tensor::Empty(device, shape, DType::kF32, MemoryKind::kOptimizerState));
        RETURN_IF_ERROR(WithContext(
            device.CopyFromHost(source.values.data() + part.begin,
                                static_cast<int64_t>(part.size() * sizeof(float)), tensor),
            absl::StrCat("restoring '", source.name, "'")));
        state[k].push_back(std::move(tensor));
      }
    }
  }
  return optimizer.Restore(steps, std::move(state));
}

}  // namespace gpipe

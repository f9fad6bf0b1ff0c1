#include "runtime/train/sharded_optimizer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/core/check.h"
#include "runtime/core/status_macros.h"

namespace gpipe {

std::vector<ElementRange> ReplicaParts(std::span<const Tensor> values, int replica, int replicas) {
  std::vector<ElementRange> parts;
  parts.reserve(values.size());
  for (const Tensor& value : values) {
    parts.push_back(ShardRange(value.num_elements(), replicas, replica));
  }
  return parts;
}

ShardedOptimizer::ShardedOptimizer(std::unique_ptr<Optimizer> inner, int replica, int replicas)
    : inner_(std::move(inner)), replica_(replica), replicas_(replicas) {
  GPIPE_CHECK(inner_ != nullptr && replicas >= 1 && replica >= 0 && replica < replicas);
}

absl::Status ShardedOptimizer::Step(Device& device, double lr, std::span<Tensor> values,
                                    std::span<const Tensor> grads) {
  if (values.size() != grads.size()) {
    return absl::InvalidArgumentError(absl::StrCat("a sharded optimizer step with ", values.size(),
                                                   " parameters and ", grads.size(), " gradients"));
  }
  const std::vector<ElementRange> parts = ReplicaParts(values, replica_, replicas_);
  std::vector<bool> owns;
  std::vector<Tensor> value_parts;
  std::vector<Tensor> grad_parts;
  for (size_t i = 0; i < values.size(); ++i) {
    owns.push_back(!parts[i].empty());
    if (parts[i].empty()) continue;
    if (grads[i].num_elements() != values[i].num_elements()) {
      return absl::InvalidArgumentError(absl::StrCat("parameter ", i, ": ", values[i].DebugString(),
                                                     " with gradient ", grads[i].DebugString()));
    }
    ASSIGN_OR_RETURN(value_parts.emplace_back(), ElementView(values[i], parts[i]));
    ASSIGN_OR_RETURN(grad_parts.emplace_back(), ElementView(grads[i], parts[i]));
  }
  if (!owns_.empty() && owns != owns_) {
    return absl::InvalidArgumentError(
        "a sharded optimizer step with other parameters than its first step or restore");
  }
  RETURN_IF_ERROR(inner_->Step(device, lr, value_parts, grad_parts));
  owns_ = std::move(owns);
  CollectState();
  return absl::OkStatus();
}

std::span<const Tensor> ShardedOptimizer::State(int key) const {
  if (key < 0 || key >= static_cast<int>(state_.size())) return {};
  return state_[key];
}

absl::Status ShardedOptimizer::Restore(int64_t steps, std::vector<std::vector<Tensor>> state) {
  std::vector<bool> owns;
  std::vector<std::vector<Tensor>> inner(state.size());
  for (size_t k = 0; k < state.size(); ++k) {
    std::vector<bool> defined;
    for (Tensor& tensor : state[k]) {
      defined.push_back(tensor.defined());
      if (tensor.defined()) inner[k].push_back(std::move(tensor));
    }
    if (k > 0 && defined != owns) {
      return absl::InvalidArgumentError(
          "sharded optimizer state whose keys cover different parameters");
    }
    owns = std::move(defined);
  }
  RETURN_IF_ERROR(inner_->Restore(steps, std::move(inner)));
  owns_ = std::move(owns);
  CollectState();
  return absl::OkStatus();
}

void ShardedOptimizer::CollectState() {
  const std::vector<std::string> keys = inner_->StateKeys();
  state_.assign(keys.size(), {});
  for (size_t k = 0; k < keys.size(); ++k) {
    const std::span<const Tensor> inner = inner_->State(static_cast<int>(k));
    if (inner.empty()) continue;  // no state yet (or none kept: plain SGD)
    size_t next = 0;
    for (const bool owned : owns_) {
      state_[k].push_back(owned && next < inner.size() ? inner[next++] : Tensor());
    }
  }
}

}  // namespace gpipe

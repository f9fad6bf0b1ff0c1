#include "runtime/backend/sim/sim_optimizer.h"

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"

namespace gpipe {

int OptimizerStatePerParameter(const pb::Optimizer& spec) {
  if (spec.has_sgd()) return spec.sgd().momentum() != 0 ? 1 : 0;
  return 2;  // Adam, AdamW: first and second moments
}

absl::Status SimOptimizer::Step(Device& /*device*/, double lr, std::span<Tensor> values,
                                std::span<const Tensor> grads) {
  if (!(lr > 0)) return absl::InvalidArgumentError(absl::StrCat("sim: learning rate ", lr));
  if (values.size() != grads.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("sim: ", values.size(), " parameters but ", grads.size(), " gradients"));
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i].shape() != grads[i].shape()) {
      return absl::InvalidArgumentError(absl::StrCat("sim: parameter ", i, " is ",
                                                     values[i].DebugString(), ", its gradient ",
                                                     grads[i].DebugString()));
    }
  }
  if (steps_ == 0) {
    for (const Tensor& value : values) {
      for (int s = 0; s < state_per_parameter_; ++s) {
        ASSIGN_OR_RETURN(Tensor state, Tensor::Empty(value.allocator(), value.shape(), DType::kF32,
                                                     MemoryKind::kOptimizerState));
        state_.push_back(std::move(state));
      }
    }
  }
  RETURN_IF_ERROR(device_.Occupy(time_));
  ++steps_;
  return absl::OkStatus();
}

absl::Status SimOptimizer::Restore(int64_t /*steps*/, std::vector<std::vector<Tensor>> /*state*/) {
  return absl::FailedPreconditionError(
      "a simulated device holds no values: its optimizer state cannot be restored");
}

}  // namespace gpipe

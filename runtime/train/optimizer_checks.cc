#include "runtime/train/optimizer_checks.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"

namespace gpipe::optimizer_internal {

absl::Status CheckPositive(const std::string& field, double value) {
  if (!(value > 0) || !std::isfinite(value)) {
    return absl::InvalidArgumentError(absl::StrCat(field, " must be > 0, got ", value));
  }
  return absl::OkStatus();
}

absl::Status CheckNonNegative(const std::string& field, double value) {
  if (!(value >= 0) || !std::isfinite(value)) {
    return absl::InvalidArgumentError(absl::StrCat(field, " must be >= 0, got ", value));
  }
  return absl::OkStatus();
}

absl::Status CheckUnitInterval(const std::string& field, double value) {
  if (!(value >= 0 && value < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(field, " must be in [0, 1), got ", value));
  }
  return absl::OkStatus();
}

absl::Status CheckStepArguments(const char* optimizer, double lr, std::span<const Tensor> values,
                                std::span<const Tensor> grads, std::span<const Tensor> state) {
  const size_t state_size = state.size();
  if (!(lr >= 0) || !std::isfinite(lr)) {
    return absl::InvalidArgumentError(
        absl::StrCat(optimizer, " step: learning rate must be finite and >= 0, got ", lr));
  }
  if (values.size() != grads.size()) {
    return absl::InvalidArgumentError(absl::StrCat(optimizer, " step: ", values.size(),
                                                   " parameters but ", grads.size(), " gradients"));
  }
  if (state_size != 0 && state_size != values.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(optimizer, " step: ", values.size(), " parameters, but the optimizer state ",
                     "was created for ", state_size, "; pass the same parameters every step"));
  }
  for (size_t i = 0; i < values.size(); ++i) {
    const Tensor& value = values[i];
    const Tensor& grad = grads[i];
    if (state_size != 0 && value.defined() && value.shape() != state[i].shape()) {
      return absl::InvalidArgumentError(
          absl::StrCat(optimizer, " step: parameter ", i, " is ", value.shape().ToString(),
                       " but its optimizer state was created for ", state[i].shape().ToString(),
                       "; pass the same parameters every step"));
    }
    if (!value.defined() || !grad.defined()) {
      return absl::InvalidArgumentError(
          absl::StrCat(optimizer, " step: parameter ", i, " or its gradient is undefined"));
    }
    if (value.dtype() != DType::kF32 || grad.dtype() != DType::kF32) {
      return absl::InvalidArgumentError(absl::StrCat(optimizer, " step: parameter ", i, " is ",
                                                     value.DebugString(), " with gradient ",
                                                     grad.DebugString(), "; both must be f32"));
    }
    if (value.shape() != grad.shape()) {
      return absl::InvalidArgumentError(absl::StrCat(optimizer, " step: parameter ", i, " is ",
                                                     value.DebugString(), " but its gradient is ",
                                                     grad.DebugString()));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckRestore(const char* optimizer, size_t keys, int64_t steps,
                          const std::vector<std::vector<Tensor>>& state) {
  if (steps < 0 || state.size() != keys) {
    return absl::InvalidArgumentError(absl::StrCat(optimizer, " restore: ", state.size(),
                                                   " state tensors per parameter after ", steps,
                                                   " steps; this optimizer keeps ", keys));
  }
  for (const std::vector<Tensor>& tensors : state) {
    if (tensors.size() != state[0].size() || (steps == 0 && !tensors.empty())) {
      return absl::InvalidArgumentError(
          absl::StrCat(optimizer, " restore: ", tensors.size(), " state tensors of one kind after ",
                       steps, " steps (state exists from the first step, one per parameter)"));
    }
  }
  return absl::OkStatus();
}

absl::Status AllocateStateLike(Device& device, std::span<const Tensor> values,
                               std::vector<Tensor>& state) {
  std::vector<Tensor> buffers;
  buffers.reserve(values.size());
  for (const Tensor& value : values) {
    ASSIGN_OR_RETURN(Tensor buffer, Tensor::Empty(device, value.shape(), DType::kF32,
                                                  MemoryKind::kOptimizerState));
    RETURN_IF_ERROR(device.ops().tensor.Fill(buffer, 0.0));
    buffers.push_back(std::move(buffer));
  }
  state = std::move(buffers);
  return absl::OkStatus();
}

}  // namespace gpipe::optimizer_internal

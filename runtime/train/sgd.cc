#include "runtime/train/sgd.h"

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"
#include "runtime/train/optimizer_checks.h"

namespace gpipe {

using optimizer_internal::CheckNonNegative;
using optimizer_internal::CheckPositive;

absl::StatusOr<std::unique_ptr<SgdOptimizer>> SgdOptimizer::Create(const pb::Sgd& spec) {
  if (!spec.has_lr()) {
    return absl::InvalidArgumentError(
        "optimizer.sgd.lr must be > 0, got 0 (it is not set, and SGD has no default; set "
        "training { optimizer { sgd { lr: ... } } })");
  }
  RETURN_IF_ERROR(CheckPositive("optimizer.sgd.lr", spec.lr()));
  RETURN_IF_ERROR(CheckNonNegative("optimizer.sgd.momentum", spec.momentum()));
  RETURN_IF_ERROR(CheckNonNegative("optimizer.sgd.dampening", spec.dampening()));
  RETURN_IF_ERROR(CheckNonNegative("optimizer.sgd.weight_decay", spec.weight_decay()));
  if (spec.nesterov() && (spec.momentum() <= 0 || spec.dampening() != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer.sgd.nesterov requires momentum > 0 and dampening = 0, got momentum ",
        spec.momentum(), " and dampening ", spec.dampening()));
  }
  return std::unique_ptr<SgdOptimizer>(new SgdOptimizer(spec));
}

// Per element, in float and in the order of torch.optim.sgd._single_tensor_sgd:
//   g = grad + wd * p
//   buf = g (first step)  |  buf = buf * momentum + (1 - dampening) * g
//   g = g + momentum * buf (nesterov)  |  g = buf
//   p = p + (-lr) * g
// Each double hyperparameter is rounded to float once, as PyTorch does for a float tensor.
// PyTorch's vectorized CPU kernels fuse some of these multiply-adds (FMA); the CPU backend's
// loop does not, so an element may differ from PyTorch's in the last bit.
absl::Status SgdOptimizer::Step(Device& device, double lr, std::span<Tensor> values,
                                std::span<const Tensor> grads) {
  const bool use_momentum = spec_.momentum() != 0;
  RETURN_IF_ERROR(optimizer_internal::CheckStepArguments(
      "sgd", lr, values, grads,
      use_momentum ? std::span<const Tensor>(momentum_buffers_) : std::span<const Tensor>()));
  const bool first_step = momentum_buffers_.empty();
  if (use_momentum && first_step) {
    RETURN_IF_ERROR(optimizer_internal::AllocateStateLike(device, values, momentum_buffers_));
  }
  const SgdUpdate update{.neg_lr = static_cast<float>(-lr),
                         .weight_decay = static_cast<float>(spec_.weight_decay()),
                         .momentum = static_cast<float>(spec_.momentum()),
                         .one_minus_dampening = static_cast<float>(1.0 - spec_.dampening()),
                         .nesterov = spec_.nesterov(),
                         .first_step = first_step};
  Tensor no_buffer;
  for (size_t i = 0; i < values.size(); ++i) {
    RETURN_IF_ERROR(device.ops().optimizer.Sgd(update, values[i], grads[i],
                                               use_momentum ? momentum_buffers_[i] : no_buffer));
  }
  ++steps_;
  return absl::OkStatus();
}

std::vector<std::string> SgdOptimizer::StateKeys() const {
  if (spec_.momentum() == 0) return {};
  return {"momentum_buffer"};
}

absl::Status SgdOptimizer::Restore(int64_t steps, std::vector<std::vector<Tensor>> state) {
  RETURN_IF_ERROR(optimizer_internal::CheckRestore("sgd", StateKeys().size(), steps, state));
  steps_ = steps;
  momentum_buffers_ = state.empty() ? std::vector<Tensor>() : std::move(state[0]);
  return absl::OkStatus();
}

}  // namespace gpipe

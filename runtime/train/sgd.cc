#include "runtime/train/sgd.h"

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
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
// PyTorch's vectorized CPU kernels fuse some of these multiply-adds (FMA); this loop does not,
// so an element may differ from PyTorch's in the last bit.
absl::Status SgdOptimizer::Step(double lr, std::span<Tensor> values,
                                std::span<const Tensor> grads) {
  const bool use_momentum = spec_.momentum() != 0;
  RETURN_IF_ERROR(optimizer_internal::CheckStepArguments(
      "sgd", lr, values, grads,
      use_momentum ? std::span<const Tensor>(momentum_buffers_) : std::span<const Tensor>()));
  const bool first_step = momentum_buffers_.empty();
  if (use_momentum && first_step) {
    RETURN_IF_ERROR(optimizer_internal::AllocateStateLike(values, momentum_buffers_));
  }
  const float weight_decay = static_cast<float>(spec_.weight_decay());
  const float momentum = static_cast<float>(spec_.momentum());
  const float one_minus_dampening = static_cast<float>(1.0 - spec_.dampening());
  const float neg_lr = static_cast<float>(-lr);
  const bool nesterov = spec_.nesterov();

  for (size_t i = 0; i < values.size(); ++i) {
    float* p = values[i].f32();
    const float* grad = grads[i].f32();
    float* buf = use_momentum ? momentum_buffers_[i].f32() : nullptr;
    const int64_t n = values[i].num_elements();
    for (int64_t j = 0; j < n; ++j) {
      float g = grad[j];
      if (weight_decay != 0) g = g + weight_decay * p[j];
      if (use_momentum) {
        if (first_step) {
          buf[j] = g;
        } else {
          buf[j] = buf[j] * momentum + one_minus_dampening * g;
        }
        g = nesterov ? g + momentum * buf[j] : buf[j];
      }
      p[j] = p[j] + neg_lr * g;
    }
  }
  ++steps_;
  return absl::OkStatus();
}

}  // namespace gpipe

#include "runtime/train/adam.h"

#include <cmath>

#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"
#include "runtime/train/optimizer_checks.h"

namespace gpipe {
namespace {

template <typename Spec>
AdamHyperparameters FromSpec(const Spec& spec, bool decoupled) {
  AdamHyperparameters hyper;
  hyper.lr = spec.lr();
  hyper.beta1 = spec.beta1();
  hyper.beta2 = spec.beta2();
  hyper.eps = spec.eps();
  hyper.weight_decay = spec.weight_decay();
  hyper.decoupled_weight_decay = decoupled;
  return hyper;
}

}  // namespace

absl::StatusOr<std::unique_ptr<AdamOptimizer>> AdamOptimizer::Create(const pb::Adam& spec) {
  return CreateChecked(FromSpec(spec, /*decoupled=*/false), "optimizer.adam");
}

absl::StatusOr<std::unique_ptr<AdamOptimizer>> AdamOptimizer::Create(const pb::AdamW& spec) {
  AdamHyperparameters hyper = FromSpec(spec, /*decoupled=*/true);
  hyper.decay_only_matrices = spec.decay_only_matrices();
  return CreateChecked(hyper, "optimizer.adamw");
}

absl::StatusOr<std::unique_ptr<AdamOptimizer>> AdamOptimizer::CreateChecked(
    const AdamHyperparameters& hyper, const std::string& field_prefix) {
  using optimizer_internal::CheckNonNegative;
  using optimizer_internal::CheckPositive;
  using optimizer_internal::CheckUnitInterval;
  RETURN_IF_ERROR(CheckPositive(field_prefix + ".lr", hyper.lr));
  RETURN_IF_ERROR(CheckUnitInterval(field_prefix + ".beta1", hyper.beta1));
  RETURN_IF_ERROR(CheckUnitInterval(field_prefix + ".beta2", hyper.beta2));
  RETURN_IF_ERROR(CheckNonNegative(field_prefix + ".eps", hyper.eps));
  RETURN_IF_ERROR(CheckNonNegative(field_prefix + ".weight_decay", hyper.weight_decay));
  return std::unique_ptr<AdamOptimizer>(new AdamOptimizer(hyper));
}

// Per element, in float and in the order of torch.optim.adam._single_tensor_adam:
//   p = p * (1 - lr * wd)                          (AdamW)
//   g = grad + wd * p                              (Adam)
//   m = lerp(m, g, 1 - beta1)
//   v = v * beta2 + ((1 - beta2) * g) * g
//   p = p + ((-lr / bc1) * m) / (sqrt(v) / sqrt(bc2) + eps)
// with bc1 = 1 - beta1^t, bc2 = 1 - beta2^t, lr / bc1 and sqrt(bc2) in double, each rounded to
// float once. PyTorch's vectorized CPU kernels fuse some multiply-adds (lerp); this loop does
// not, so results may differ from PyTorch's in the last bit of an element.
absl::Status AdamOptimizer::Step(Device& device, double lr, std::span<Tensor> values,
                                 std::span<const Tensor> grads) {
  const char* name = hyper_.decoupled_weight_decay ? "adamw" : "adam";
  RETURN_IF_ERROR(optimizer_internal::CheckStepArguments(name, lr, values, grads, exp_avg_));
  if (exp_avg_.empty() && !values.empty()) {
    std::vector<Tensor> first, second;
    RETURN_IF_ERROR(optimizer_internal::AllocateStateLike(device, values, first));
    RETURN_IF_ERROR(optimizer_internal::AllocateStateLike(device, values, second));
    exp_avg_ = std::move(first);
    exp_avg_sq_ = std::move(second);
  }

  const double t = static_cast<double>(steps_ + 1);
  const double bias_correction1 = 1.0 - std::pow(hyper_.beta1, t);
  const double bias_correction2 = 1.0 - std::pow(hyper_.beta2, t);
  const bool decay = hyper_.weight_decay != 0;
  const bool decoupled = hyper_.decoupled_weight_decay;
  const AdamUpdate update{
      .neg_step_size = static_cast<float>(-(lr / bias_correction1)),
      .bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2)),
      .eps = static_cast<float>(hyper_.eps),
      .lerp_weight = static_cast<float>(1.0 - hyper_.beta1),
      .beta2 = static_cast<float>(hyper_.beta2),
      .one_minus_beta2 = static_cast<float>(1.0 - hyper_.beta2),
      .l2 = decay && !decoupled ? static_cast<float>(hyper_.weight_decay) : 0.0f,
      .decoupled_scale =
          decay && decoupled ? static_cast<float>(1.0 - lr * hyper_.weight_decay) : 1.0f};
  AdamUpdate without_decay = update;
  without_decay.l2 = 0.0f;
  without_decay.decoupled_scale = 1.0f;
  for (size_t i = 0; i < values.size(); ++i) {
    // nanoGPT's grouping: weight matrices, kernels and embeddings decay; biases and norms do not.
    const bool decays = !hyper_.decay_only_matrices || values[i].shape().rank() >= 2;
    RETURN_IF_ERROR(device.ops().optimizer.Adam(decays ? update : without_decay, values[i],
                                                grads[i], exp_avg_[i], exp_avg_sq_[i]));
  }
  ++steps_;
  return absl::OkStatus();
}

absl::Status AdamOptimizer::Restore(int64_t steps, std::vector<std::vector<Tensor>> state) {
  RETURN_IF_ERROR(optimizer_internal::CheckRestore(hyper_.decoupled_weight_decay ? "adamw" : "adam",
                                                   2, steps, state));
  steps_ = steps;
  exp_avg_ = std::move(state[0]);
  exp_avg_sq_ = std::move(state[1]);
  return absl::OkStatus();
}

}  // namespace gpipe

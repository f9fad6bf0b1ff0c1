#include "runtime/train/adam.h"

#include <cmath>

#include "runtime/core/status_macros.h"
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

// torch.lerp's float formula: start + w * (end - start) for |w| < 0.5, otherwise
// end - (end - start) * (1 - w).
inline float Lerp(float start, float end, float weight) {
  return std::fabs(weight) < 0.5f ? start + weight * (end - start)
                                  : end - (end - start) * (1.0f - weight);
}

}  // namespace

absl::StatusOr<std::unique_ptr<AdamOptimizer>> AdamOptimizer::Create(const pb::Adam& spec) {
  return CreateChecked(FromSpec(spec, /*decoupled=*/false), "optimizer.adam");
}

absl::StatusOr<std::unique_ptr<AdamOptimizer>> AdamOptimizer::Create(const pb::AdamW& spec) {
  return CreateChecked(FromSpec(spec, /*decoupled=*/true), "optimizer.adamw");
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
absl::Status AdamOptimizer::Step(double lr, std::span<Tensor> values,
                                 std::span<const Tensor> grads) {
  const char* name = hyper_.decoupled_weight_decay ? "adamw" : "adam";
  RETURN_IF_ERROR(optimizer_internal::CheckStepArguments(name, lr, values, grads, exp_avg_));
  if (exp_avg_.empty() && !values.empty()) {
    std::vector<Tensor> first, second;
    RETURN_IF_ERROR(optimizer_internal::AllocateStateLike(values, first));
    RETURN_IF_ERROR(optimizer_internal::AllocateStateLike(values, second));
    exp_avg_ = std::move(first);
    exp_avg_sq_ = std::move(second);
  }

  const double t = static_cast<double>(steps_ + 1);
  const double bias_correction1 = 1.0 - std::pow(hyper_.beta1, t);
  const double bias_correction2 = 1.0 - std::pow(hyper_.beta2, t);
  const float neg_step_size = static_cast<float>(-(lr / bias_correction1));
  const float bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  const float eps = static_cast<float>(hyper_.eps);
  const float lerp_weight = static_cast<float>(1.0 - hyper_.beta1);
  const float beta2 = static_cast<float>(hyper_.beta2);
  const float one_minus_beta2 = static_cast<float>(1.0 - hyper_.beta2);
  const bool decay = hyper_.weight_decay != 0;
  const bool decoupled = hyper_.decoupled_weight_decay;
  const float l2 = static_cast<float>(hyper_.weight_decay);
  const float decoupled_scale = static_cast<float>(1.0 - lr * hyper_.weight_decay);

  for (size_t i = 0; i < values.size(); ++i) {
    float* p = values[i].f32();
    const float* grad = grads[i].f32();
    float* m = exp_avg_[i].f32();
    float* v = exp_avg_sq_[i].f32();
    const int64_t n = values[i].num_elements();
    for (int64_t j = 0; j < n; ++j) {
      float g = grad[j];
      if (decay) {
        if (decoupled) {
          p[j] = p[j] * decoupled_scale;
        } else {
          g = g + l2 * p[j];
        }
      }
      m[j] = Lerp(m[j], g, lerp_weight);
      v[j] = v[j] * beta2 + one_minus_beta2 * g * g;
      const float denom = std::sqrt(v[j]) / bias_correction2_sqrt + eps;
      p[j] = p[j] + neg_step_size * m[j] / denom;
    }
  }
  ++steps_;
  return absl::OkStatus();
}

}  // namespace gpipe

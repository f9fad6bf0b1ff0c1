#include "runtime/device/cpu/cpu_optimizer_ops.h"

#include <cmath>

#include "runtime/core/status_macros.h"
#include "runtime/device/ops/op_checks.h"

namespace gpipe {
namespace {

using op_checks::DTypeIs;
using op_checks::Elements;

// torch.lerp's float formula: start + w * (end - start) for |w| < 0.5, otherwise
// end - (end - start) * (1 - w).
inline float Lerp(float start, float end, float weight) {
  return std::fabs(weight) < 0.5f ? start + weight * (end - start)
                                  : end - (end - start) * (1.0f - weight);
}

// One branch-free loop per combination of the update's switches, so each vectorizes.
template <bool kDecay, bool kMomentum, bool kFirst, bool kNesterov>
void SgdLoop(const SgdUpdate& u, float* __restrict p, const float* __restrict grad,
             float* __restrict buf, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    float g = grad[j];
    if constexpr (kDecay) g = g + u.weight_decay * p[j];
    if constexpr (kMomentum) {
      if constexpr (kFirst) {
        buf[j] = g;
      } else {
        buf[j] = buf[j] * u.momentum + u.one_minus_dampening * g;
      }
      if constexpr (kNesterov) {
        g = g + u.momentum * buf[j];
      } else {
        g = buf[j];
      }
    }
    p[j] = p[j] + u.neg_lr * g;
  }
}

template <bool kDecay>
void SgdDispatch(const SgdUpdate& u, float* p, const float* grad, float* buf, int64_t n) {
  if (u.momentum == 0) return SgdLoop<kDecay, false, false, false>(u, p, grad, buf, n);
  if (u.first_step) {
    return u.nesterov ? SgdLoop<kDecay, true, true, true>(u, p, grad, buf, n)
                      : SgdLoop<kDecay, true, true, false>(u, p, grad, buf, n);
  }
  return u.nesterov ? SgdLoop<kDecay, true, false, true>(u, p, grad, buf, n)
                    : SgdLoop<kDecay, true, false, false>(u, p, grad, buf, n);
}

}  // namespace

absl::Status CpuOptimizerOps::DoSgd(const SgdUpdate& u, Tensor& param, const Tensor& grad,
                                    Tensor& momentum_buffer) const {
  const int64_t n = param.num_elements();
  const bool use_momentum = u.momentum != 0;
  float* buf = use_momentum ? momentum_buffer.data<float>() : nullptr;
  if (u.weight_decay != 0) {
    SgdDispatch<true>(u, param.data<float>(), grad.data<float>(), buf, n);
  } else {
    SgdDispatch<false>(u, param.data<float>(), grad.data<float>(), buf, n);
  }
  return absl::OkStatus();
}

absl::Status CpuOptimizerOps::DoAdam(const AdamUpdate& u, Tensor& param, const Tensor& grad,
                                     Tensor& exp_avg, Tensor& exp_avg_sq) const {
  const int64_t n = param.num_elements();
  float* __restrict p = param.data<float>();
  const float* __restrict g_in = grad.data<float>();
  float* __restrict m = exp_avg.data<float>();
  float* __restrict v = exp_avg_sq.data<float>();
  const bool decoupled = u.decoupled_scale != 1.0f;
  for (int64_t j = 0; j < n; ++j) {
    float g = g_in[j];
    if (decoupled) {
      p[j] = p[j] * u.decoupled_scale;
    } else if (u.l2 != 0) {
      g = g + u.l2 * p[j];
    }
    m[j] = Lerp(m[j], g, u.lerp_weight);
    v[j] = v[j] * u.beta2 + u.one_minus_beta2 * g * g;
    const float denom = std::sqrt(v[j]) / u.bias_correction2_sqrt + u.eps;
    p[j] = p[j] + u.neg_step_size * m[j] / denom;
  }
  return absl::OkStatus();
}

}  // namespace gpipe

#include "runtime/device/cpu/cpu_activation_ops.h"

#include <cmath>
#include <cstdint>

namespace gpipe {
namespace {

constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;

// One plain loop per activation and direction, so each vectorizes on its own.
void ReluForward(const float* __restrict x, float* __restrict y, int64_t n) {
  // NaN passes through (as torch.relu), so a diverging run is not masked.
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] <= 0.0f ? 0.0f : x[i];
}

void ReluBackward(const float* __restrict y, const float* __restrict dy, float* __restrict dx,
                  int64_t n) {
  // dy is read unconditionally so the select vectorizes (a load under the condition does not).
  for (int64_t i = 0; i < n; ++i) {
    const float g = dy[i];
    dx[i] = y[i] > 0.0f ? g : 0.0f;
  }
}

void TanhForward(const float* __restrict x, float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
}

void TanhBackward(const float* __restrict y, const float* __restrict dy, float* __restrict dx,
                  int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
}

void GeluForward(const float* __restrict x, float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * 0.5f * (1.0f + std::erf(x[i] * kInvSqrt2));
}

void GeluBackward(const float* __restrict x, const float* __restrict dy, float* __restrict dx,
                  int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float cdf = 0.5f * (1.0f + std::erf(x[i] * kInvSqrt2));
    const float pdf = kInvSqrt2Pi * std::exp(-0.5f * x[i] * x[i]);
    dx[i] = dy[i] * (cdf + x[i] * pdf);
  }
}

// silu(g) = g / (1 + exp(-g)): torch's formula, so the forward matches it bit for bit where
// exp does.
inline float Sigmoid(float g) { return 1.0f / (1.0f + std::exp(-g)); }

}  // namespace

absl::Status CpuActivationOps::DoSwiGluForward(const Tensor& gate, const Tensor& up,
                                               Tensor& y) const {
  const float* __restrict g = gate.f32();
  const float* __restrict u = up.f32();
  float* __restrict out = y.f32();
  const int64_t n = gate.num_elements();
  for (int64_t i = 0; i < n; ++i) out[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  return absl::OkStatus();
}

absl::Status CpuActivationOps::DoSwiGluBackward(const Tensor& gate, const Tensor& up,
                                                const Tensor& dy, Tensor& dgate,
                                                Tensor& dup) const {
  const float* __restrict g = gate.f32();
  const float* __restrict u = up.f32();
  const float* __restrict grad = dy.f32();
  float* __restrict dg = dgate.f32();
  float* __restrict du = dup.f32();
  const int64_t n = gate.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    const float s = Sigmoid(g[i]);
    dg[i] = grad[i] * u[i] * (s * (1.0f + g[i] * (1.0f - s)));
    du[i] = grad[i] * (g[i] / (1.0f + std::exp(-g[i])));
  }
  return absl::OkStatus();
}

absl::Status CpuActivationOps::DoForward(Activation activation, const Tensor& x, Tensor& y) const {
  const int64_t n = x.num_elements();
  switch (activation) {
    case Activation::kRelu:
      ReluForward(x.f32(), y.f32(), n);
      return absl::OkStatus();
    case Activation::kTanh:
      TanhForward(x.f32(), y.f32(), n);
      return absl::OkStatus();
    case Activation::kGelu:
      GeluForward(x.f32(), y.f32(), n);
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError("ActivationOps::Forward: unknown activation");
}

absl::Status CpuActivationOps::DoBackward(Activation activation, const Tensor& saved,
                                          const Tensor& dy, Tensor& dx) const {
  const int64_t n = dy.num_elements();
  switch (activation) {
    case Activation::kRelu:
      ReluBackward(saved.f32(), dy.f32(), dx.f32(), n);
      return absl::OkStatus();
    case Activation::kTanh:
      TanhBackward(saved.f32(), dy.f32(), dx.f32(), n);
      return absl::OkStatus();
    case Activation::kGelu:
      GeluBackward(saved.f32(), dy.f32(), dx.f32(), n);
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError("ActivationOps::Backward: unknown activation");
}

}  // namespace gpipe

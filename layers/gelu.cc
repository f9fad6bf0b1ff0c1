#include "layers/gelu.h"

#include <cmath>

namespace gpipe {
namespace {

constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;

}  // namespace

absl::StatusOr<std::unique_ptr<Layer>> Gelu::Create(const pb::Layer& spec,
                                                    const Shape& input_shape) {
  return std::unique_ptr<Layer>(new Gelu(spec.name(), input_shape));
}

Gelu::Gelu(std::string name, const Shape& input_shape)
    : ElementwiseActivation(std::move(name), input_shape, Saves::kInput,
                            /*flops_per_element=*/8.0) {}

void Gelu::ApplyForward(const float* x, float* y, int64_t n) const {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * 0.5f * (1.0f + std::erf(x[i] * kInvSqrt2));
}

void Gelu::ApplyBackward(const float* x, const float* dy, float* dx, int64_t n) const {
  for (int64_t i = 0; i < n; ++i) {
    const float cdf = 0.5f * (1.0f + std::erf(x[i] * kInvSqrt2));
    const float pdf = kInvSqrt2Pi * std::exp(-0.5f * x[i] * x[i]);
    dx[i] = dy[i] * (cdf + x[i] * pdf);
  }
}

}  // namespace gpipe

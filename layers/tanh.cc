#include "layers/tanh.h"

#include <cmath>

namespace gpipe {

absl::StatusOr<std::unique_ptr<Layer>> Tanh::Create(const pb::Layer& spec,
                                                    const Shape& input_shape) {
  return std::unique_ptr<Layer>(new Tanh(spec.name(), input_shape));
}

Tanh::Tanh(std::string name, const Shape& input_shape)
    : ElementwiseActivation(std::move(name), input_shape, Saves::kOutput,
                            /*flops_per_element=*/4.0) {}

void Tanh::ApplyForward(const float* x, float* y, int64_t n) const {
  for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
}

void Tanh::ApplyBackward(const float* y, const float* dy, float* dx, int64_t n) const {
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
}

}  // namespace gpipe

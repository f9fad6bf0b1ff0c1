#include "layers/relu.h"

namespace gpipe {

absl::StatusOr<std::unique_ptr<Layer>> Relu::Create(const pb::Layer& spec,
                                                    const Shape& input_shape) {
  return std::unique_ptr<Layer>(new Relu(spec.name(), input_shape));
}

Relu::Relu(std::string name, const Shape& input_shape)
    : ElementwiseActivation(std::move(name), input_shape, Saves::kOutput,
                            /*flops_per_element=*/1.0) {}

void Relu::ApplyForward(const float* x, float* y, int64_t n) const {
  // NaN passes through (as torch.relu), so a diverging run is not masked.
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] <= 0.0f ? 0.0f : x[i];
}

void Relu::ApplyBackward(const float* y, const float* dy, float* dx, int64_t n) const {
  for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

}  // namespace gpipe

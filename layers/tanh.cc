#include "layers/tanh.h"

namespace gpipe {

absl::StatusOr<std::unique_ptr<Layer>> Tanh::Create(const pb::Layer& spec,
                                                    const Shape& input_shape) {
  return std::unique_ptr<Layer>(new Tanh(spec.name(), input_shape));
}

Tanh::Tanh(std::string name, const Shape& input_shape)
    : ElementwiseActivation(std::move(name), input_shape, Activation::kTanh,
                            /*flops_per_element=*/4.0) {}

}  // namespace gpipe

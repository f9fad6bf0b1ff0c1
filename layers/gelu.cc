#include "layers/gelu.h"

namespace gpipe {

absl::StatusOr<std::unique_ptr<Layer>> Gelu::Create(const pb::Layer& spec,
                                                    const Shape& input_shape) {
  return std::unique_ptr<Layer>(new Gelu(spec.name(), input_shape));
}

Gelu::Gelu(std::string name, const Shape& input_shape)
    : ElementwiseActivation(std::move(name), input_shape, Activation::kGelu,
                            /*flops_per_element=*/8.0) {}

}  // namespace gpipe

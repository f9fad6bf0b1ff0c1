#include "layers/relu.h"

namespace gpipe {

absl::StatusOr<std::unique_ptr<Layer>> Relu::Create(const pb::Layer& spec,
                                                    const Shape& input_shape) {
  return std::unique_ptr<Layer>(new Relu(spec.name(), input_shape));
}

Relu::Relu(std::string name, const Shape& input_shape)
    : ElementwiseActivation(std::move(name), input_shape, Activation::kRelu,
                            /*flops_per_element=*/1.0) {}

}  // namespace gpipe

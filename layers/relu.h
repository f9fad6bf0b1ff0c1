// Relu: y = max(x, 0), elementwise (torch.nn.ReLU). No parameters. Saves its output; the
// derivative used at x == 0 is 0, as in PyTorch.
#ifndef GPIPE_LAYERS_RELU_H_
#define GPIPE_LAYERS_RELU_H_

#include <memory>

#include "layers/elementwise_activation.h"
#include "proto/plan.pb.h"

namespace gpipe {

class Relu final : public ElementwiseActivation {
 public:
  static absl::StatusOr<std::unique_ptr<Layer>> Create(const pb::Layer& spec,
                                                       const Shape& input_shape);
  std::string_view type() const override { return "relu"; }

 private:
  Relu(std::string name, const Shape& input_shape);
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_RELU_H_

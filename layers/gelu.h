// Gelu: exact GELU, y = x * Phi(x) = x * 0.5 * (1 + erf(x / sqrt(2))), elementwise
// (torch.nn.GELU with approximate='none'). No parameters. Saves its input, since
// dy/dx = Phi(x) + x * phi(x) with phi the standard normal density.
#ifndef GPIPE_LAYERS_GELU_H_
#define GPIPE_LAYERS_GELU_H_

#include <memory>

#include "layers/elementwise_activation.h"
#include "proto/plan.pb.h"

namespace gpipe {

class Gelu final : public ElementwiseActivation {
 public:
  static absl::StatusOr<std::unique_ptr<Layer>> Create(const pb::Layer& spec,
                                                       const Shape& input_shape);
  std::string_view type() const override { return "gelu"; }

 private:
  Gelu(std::string name, const Shape& input_shape);
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_GELU_H_

// Tanh: y = tanh(x), elementwise (torch.nn.Tanh). No parameters. Saves its output, since
// dy/dx = 1 - y^2.
#ifndef GPIPE_LAYERS_TANH_H_
#define GPIPE_LAYERS_TANH_H_

#include <memory>

#include "layers/elementwise_activation.h"
#include "proto/plan.pb.h"

namespace gpipe {

class Tanh final : public ElementwiseActivation {
 public:
  static absl::StatusOr<std::unique_ptr<Layer>> Create(const pb::Layer& spec,
                                                       const Shape& input_shape);
  std::string_view type() const override { return "tanh"; }

 private:
  Tanh(std::string name, const Shape& input_shape);
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_TANH_H_

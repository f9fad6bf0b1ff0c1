// Mse: mean squared error over every element (torch.nn.MSELoss with reduction='mean' on the
// whole mini-batch). Targets are f32 and shaped like the output. A call on one micro-batch
// adds sum of squared errors / (global_batch * elements per sample) into totals[kLossSum] and
// returns the matching gradient; it counts no correct predictions. Stateless;
// thread-compatible.
#ifndef GPIPE_LAYERS_MSE_H_
#define GPIPE_LAYERS_MSE_H_

#include "layers/loss.h"

namespace gpipe {

class Mse final : public Loss {
 public:
  std::string_view type() const override { return "mse"; }
  DType target_dtype() const override { return DType::kF32; }
  Shape target_shape(const Shape& output_shape) const override { return output_shape; }
  absl::Status ValidateOutputShape(const Shape& output_shape) const override;
  // Fails with INVALID_ARGUMENT on mismatched shapes or dtypes or global_batch < 1.
  absl::StatusOr<Tensor> Compute(Device& device, const Tensor& output, const Tensor& targets,
                                 int64_t global_batch, Tensor& totals) const override;
  bool counts_correct() const override { return false; }
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_MSE_H_

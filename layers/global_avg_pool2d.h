// GlobalAvgPool2d: the mean over height and width of each channel, per-sample [C, H, W] -> [C]
// (torch.nn.AdaptiveAvgPool2d(1) followed by flatten). No parameters; Forward saves nothing
// (the gradient, dy / (H * W) spread over each channel, depends only on the shapes). Means are
// summed in double (ConvOps::GlobalAvgPool2d*).
#ifndef GPIPE_LAYERS_GLOBAL_AVG_POOL2D_H_
#define GPIPE_LAYERS_GLOBAL_AVG_POOL2D_H_

#include <memory>

#include "layers/layer.h"
#include "proto/plan.pb.h"

namespace gpipe {

class GlobalAvgPool2d final : public Layer {
 public:
  // Fails with INVALID_ARGUMENT naming the shape unless the input is [C, H, W].
  static absl::StatusOr<std::unique_ptr<Layer>> Create(const pb::Layer& spec,
                                                       const Shape& input_shape);

  std::string_view type() const override { return "global_avg_pool2d"; }
  // One addition per input element.
  double ForwardFlopsPerSample() const override;
  absl::StatusOr<Tensor> Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                 const Tensor& x, SavedTensors& saved) const override;
  absl::StatusOr<Tensor> Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                  std::span<Tensor> grads, const SavedTensors& saved,
                                  const Tensor& dy) const override;
  // Nothing.
  std::vector<SavedSpec> SavedPerSample() const override { return {}; }

 private:
  GlobalAvgPool2d(std::string name, const Shape& input_shape);

  int64_t channels_;
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_GLOBAL_AVG_POOL2D_H_

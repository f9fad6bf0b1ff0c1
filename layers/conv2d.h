// Conv2d: 2-D convolution (cross-correlation, as torch.nn.Conv2d) over per-sample
// [in_channels, H, W] inputs, with stride, zero padding, dilation, channel groups and bias.
// weight [out_channels, in_channels / groups, kernel_h, kernel_w], bias [out_channels], both
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = in_channels / groups * kernel_h * kernel_w.
// Computed by the device's ConvOps (forward, input gradient, accumulated parameter gradients).
// Forward saves only its input.
#ifndef GPIPE_LAYERS_CONV2D_H_
#define GPIPE_LAYERS_CONV2D_H_

#include <memory>

#include "layers/layer.h"
#include "layers/split_backward_layer.h"
#include "layers/window2d.h"
#include "proto/plan.pb.h"

namespace gpipe {

class Conv2d final : public SplitBackwardLayer {
 public:
  // Fails with INVALID_ARGUMENT naming the field for a bad configuration (missing
  // out_channels or kernel_size, a field with other than 1 or 2 values or a value out of range,
  // groups not dividing both channel counts) or naming the shape for an input that is not
  // [C, H, W] or too small for the window.
  static absl::StatusOr<std::unique_ptr<Layer>> Create(const pb::Layer& spec,
                                                       const Shape& input_shape);

  std::string_view type() const override { return "conv2d"; }
  std::vector<ParamSpec> parameter_specs() const override;
  // 2 * out_channels * H_out * W_out * in_channels / groups * kernel_h * kernel_w.
  double ForwardFlopsPerSample() const override;
  absl::StatusOr<Tensor> Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                 const Tensor& x, SavedTensors& saved) const override;
  // Saves its input: {kInput}.
  std::vector<SavedSpec> SavedPerSample() const override;
  // The halves (Backward is BackwardWeight then BackwardInput: SplitBackwardLayer).
  absl::StatusOr<Tensor> BackwardInput(const LayerContext& ctx, std::span<const Tensor> params,
                                       const SavedTensors& saved, const Tensor& dy) const override;
  absl::Status BackwardWeight(const LayerContext& ctx, std::span<Tensor> grads,
                              const SavedTensors& saved, const Tensor& dy) const override;

 private:
  Conv2d(std::string name, const Shape& input_shape, const Window2d& window, int64_t out_channels,
         int64_t groups, bool bias);
  // Checks that `saved` holds a Forward's input and dy matches that Forward's output.
  absl::Status CheckOutputGrad(const SavedTensors& saved, const Tensor& dy) const;
  // dW += weight gradient; db += bias gradient (ConvOps::Conv2dBackwardParams).
  absl::Status AccumulateParamGrads(const LayerContext& ctx, std::span<Tensor> grads,
                                    const Tensor& x, const Tensor& dy) const;
  // dx (undefined when !ctx.need_input_grad).
  absl::StatusOr<Tensor> InputGrad(const LayerContext& ctx, std::span<const Tensor> params,
                                   const Tensor& x, const Tensor& dy) const;

  Window2d window_;
  int64_t out_channels_;
  int64_t groups_;
  bool bias_;
  // Per group: input channels, and weights per output channel (in_channels/groups * kh * kw).
  int64_t group_in_;
  int64_t group_rows_;
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_CONV2D_H_

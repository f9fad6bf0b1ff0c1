// MaxPool2d and AvgPool2d: window reductions over each channel of a per-sample
// [channels, H, W] input (torch.nn.MaxPool2d / AvgPool2d, floor mode); no parameters.
// max_pool2d: padding is -infinity; the gradient goes to the first maximum of each window in
// row-major scan order (NaN propagates, as in PyTorch). Forward saves its input and output
// (shared storage, no copy) and Backward finds where in each window the output came from, so the
// layer keeps no index tensor.
// avg_pool2d: zero padding, divided by the whole window (count_include_pad) or by the input
// elements it covers; saves nothing. Both need padding <= kernel / 2, as PyTorch does.
// Both compute through the device's ConvOps::Pool2d*.
#ifndef GPIPE_LAYERS_POOL2D_H_
#define GPIPE_LAYERS_POOL2D_H_

#include <memory>
#include <vector>

#include "layers/layer.h"
#include "layers/window2d.h"
#include "proto/plan.pb.h"

namespace gpipe {

// What the two pools share: the window and the checks of input and output gradient.
class Pool2d : public Layer {
 protected:
  Pool2d(std::string name, const Shape& input_shape, const Window2d& window);

  // Checks that x is f32 [batch, input_shape...].
  absl::Status CheckInput(const Tensor& x) const;
  // Checks that dy is f32 [batch, output_shape...]; returns the batch.
  absl::StatusOr<int64_t> CheckOutputGrad(const Tensor& dy) const;
  // The ConvOps geometry of a batch.
  Conv2dGeometry Geometry(int64_t batch) const {
    return window_.Geometry(batch, window_.channels, 1);
  }

  Window2d window_;
};

class MaxPool2d final : public Pool2d {
 public:
  // Fails with INVALID_ARGUMENT naming the field or the input shape (see Window2d).
  static absl::StatusOr<std::unique_ptr<Layer>> Create(const pb::Layer& spec,
                                                       const Shape& input_shape);

  std::string_view type() const override { return "max_pool2d"; }
  // One comparison per window tap.
  double ForwardFlopsPerSample() const override;
  absl::StatusOr<Tensor> Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                 const Tensor& x, SavedTensors& saved) const override;
  absl::StatusOr<Tensor> Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                  std::span<Tensor> grads, const SavedTensors& saved,
                                  const Tensor& dy) const override;
  // {kInput, kOutput}.
  std::vector<SavedSpec> SavedPerSample() const override;

 private:
  MaxPool2d(std::string name, const Shape& input_shape, const Window2d& window);
};

class AvgPool2d final : public Pool2d {
 public:
  // Fails with INVALID_ARGUMENT naming the field or the input shape (see Window2d).
  static absl::StatusOr<std::unique_ptr<Layer>> Create(const pb::Layer& spec,
                                                       const Shape& input_shape);

  std::string_view type() const override { return "avg_pool2d"; }
  // One addition per window tap.
  double ForwardFlopsPerSample() const override;
  absl::StatusOr<Tensor> Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                 const Tensor& x, SavedTensors& saved) const override;
  absl::StatusOr<Tensor> Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                  std::span<Tensor> grads, const SavedTensors& saved,
                                  const Tensor& dy) const override;
  // Nothing: the gradient depends only on the shapes.
  std::vector<SavedSpec> SavedPerSample() const override { return {}; }

 private:
  AvgPool2d(std::string name, const Shape& input_shape, const Window2d& window,
            bool count_include_pad);

  PoolKind kind_;  // kAvg (count_include_pad) or kAvgExcludePad
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_POOL2D_H_

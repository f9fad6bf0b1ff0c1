// MaxPool2d and AvgPool2d: window reductions over each channel of a per-sample
// [channels, H, W] input (torch.nn.MaxPool2d / AvgPool2d, floor mode); no parameters.
// max_pool2d: padding is -infinity; the gradient goes to the first maximum of each window in
// row-major scan order (NaN propagates, as in PyTorch). Forward saves its input and output
// (shared storage, no copy) and Backward finds where in each window the output came from, so the
// layer keeps no index tensor.
// avg_pool2d: zero padding, divided by the whole window (count_include_pad) or by the input
// elements it covers; saves nothing. Both need padding <= kernel / 2, as PyTorch does.
#ifndef GPIPE_LAYERS_POOL2D_H_
#define GPIPE_LAYERS_POOL2D_H_

#include <memory>
#include <vector>

#include "layers/layer.h"
#include "layers/window2d.h"
#include "proto/plan.pb.h"

namespace gpipe {

// The window loop the two pools share: per-sample shapes, the taps of each output row and
// column that land inside the input, and the checks of input and output gradient.
class Pool2d : public Layer {
 protected:
  Pool2d(std::string name, const Shape& input_shape, const Window2d& window);

  // Checks that x is f32 [batch, input_shape...].
  absl::Status CheckInput(const Tensor& x) const;
  // Checks that dy is f32 [batch, output_shape...]; returns the batch.
  absl::StatusOr<int64_t> CheckOutputGrad(const Tensor& dy) const;

  // The input elements window (oh, ow) covers, padding left out: rows x cols taps, the first at
  // flat index `first` of its [H, W] plane, the others every row_step_ and col_step_ elements.
  struct Taps {
    int64_t first = 0;
    int64_t rows = 0;
    int64_t cols = 0;
  };
  Taps TapsOf(int64_t oh, int64_t ow) const {
    const IndexRange rows = row_taps_[oh];
    const IndexRange cols = col_taps_[ow];
    if (rows.size() == 0 || cols.size() == 0) return {};
    const int64_t top = oh * window_.stride.h - window_.padding.h + rows.begin * window_.dilation.h;
    const int64_t left =
        ow * window_.stride.w - window_.padding.w + cols.begin * window_.dilation.w;
    return {top * window_.input.w + left, rows.size(), cols.size()};
  }

  Window2d window_;
  std::vector<IndexRange> row_taps_;  // per output row: kernel rows inside the input
  std::vector<IndexRange> col_taps_;  // per output column: kernel columns inside the input
  int64_t row_step_;                  // between vertically adjacent taps in a plane
  int64_t col_step_;                  // between horizontally adjacent taps
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
  // The divisor of a window with these taps.
  float Divisor(const Taps& taps) const;

  bool count_include_pad_;
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_POOL2D_H_

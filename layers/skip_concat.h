// SkipConcat (plan: skip_concat { from axis }): y = concat(x, s) along one per-sample dimension,
// x first, s the output of the earlier layer `from`; every other dimension must be equal. The
// backward splits dL/dy back into dL/dx and dL/ds. No parameters, nothing saved. A SkipJoin: the
// runtime calls ForwardJoin and BackwardJoin; Forward and Backward refuse.
#ifndef GPIPE_LAYERS_SKIP_CONCAT_H_
#define GPIPE_LAYERS_SKIP_CONCAT_H_

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "layers/layer.h"
#include "proto/plan.pb.h"

namespace gpipe {

class SkipConcat final : public Layer, public SkipJoin {
 public:
  // INVALID_ARGUMENT for an axis outside the shapes or shapes that differ elsewhere.
  static absl::StatusOr<std::unique_ptr<Layer>> Create(const pb::Layer& spec,
                                                       const Shape& input_shape,
                                                       const Shape& skip_shape);

  std::string_view type() const override { return "skip_concat"; }
  double ForwardFlopsPerSample() const override { return 0; }
  std::vector<SavedSpec> SavedPerSample() const override { return {}; }
  const SkipJoin* skip_join() const override { return this; }
  const std::string& skip_from() const override { return from_; }
  const Shape& skip_shape() const override { return skip_shape_; }

  absl::StatusOr<Tensor> Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                 const Tensor& x, SavedTensors& saved) const override;
  absl::StatusOr<Tensor> Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                  std::span<Tensor> grads, const SavedTensors& saved,
                                  const Tensor& dy) const override;
  absl::StatusOr<Tensor> ForwardJoin(const LayerContext& ctx, const Tensor& x, const Tensor& skip,
                                     SavedTensors& saved) const override;
  absl::StatusOr<Grads> BackwardJoin(const LayerContext& ctx, const SavedTensors& saved,
                                     const Tensor& dy) const override;

 private:
  SkipConcat(std::string name, std::string from, Shape input, Shape skip, Shape output, int axis);
  // Copies between y and its two parts, viewed as [rows, width] blocks: x's row r is y's row r
  // up to x_width, s's the rest. `into_parts` copies y out into x and s; else x and s into y.
  absl::Status CopyBlocks(const LayerContext& ctx, Tensor& x, Tensor& s, Tensor& y,
                          bool into_parts) const;

  std::string from_;
  Shape skip_shape_;
  int64_t rows_per_sample_ = 1;  // product of the dimensions before the axis
  int64_t x_width_ = 0;          // x's elements per row: its axis length times the dims after it
  int64_t s_width_ = 0;
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_SKIP_CONCAT_H_

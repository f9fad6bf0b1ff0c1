// SkipAdd (plan: skip_add { from }): y = x + s, s the output of the earlier layer `from`, with the
// same per-sample shape. dL/dx = dL/ds = dL/dy (dx a copy, ds dy itself). No parameters, nothing
// saved. A SkipJoin: the
// runtime calls ForwardJoin and BackwardJoin; Forward and Backward refuse.
#ifndef GPIPE_LAYERS_SKIP_ADD_H_
#define GPIPE_LAYERS_SKIP_ADD_H_

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "layers/layer.h"
#include "proto/plan.pb.h"

namespace gpipe {

class SkipAdd final : public Layer, public SkipJoin {
 public:
  // INVALID_ARGUMENT when the shapes differ.
  static absl::StatusOr<std::unique_ptr<Layer>> Create(const pb::Layer& spec,
                                                       const Shape& input_shape,
                                                       const Shape& skip_shape);

  std::string_view type() const override { return "skip_add"; }
  double ForwardFlopsPerSample() const override {
    return static_cast<double>(output_shape().num_elements());
  }
  std::vector<SavedSpec> SavedPerSample() const override { return {}; }
  const SkipJoin* skip_join() const override { return this; }
  const std::string& skip_from() const override { return from_; }
  const Shape& skip_shape() const override { return input_shape(); }

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
  SkipAdd(std::string name, std::string from, const Shape& shape)
      : Layer(std::move(name), shape, shape), from_(std::move(from)) {}
  std::string from_;
};

// What Forward and Backward of a join answer: the runtime must call the join methods.
absl::Status JoinCalledAlone(const Layer& layer);
// INVALID_ARGUMENT unless `t` is f32 [batch, sample...] with `batch` rows.
absl::Status CheckJoinOperand(const Layer& layer, const char* what, const Tensor& t,
                              const Shape& sample, int64_t batch);

}  // namespace gpipe

#endif  // GPIPE_LAYERS_SKIP_ADD_H_

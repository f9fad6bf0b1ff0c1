// LayerNorm: normalizes over the last dimension D (torch.nn.LayerNorm(D)):
//   y = (x - mean) / sqrt(var + eps) * weight + bias, var biased (divides by D).
// weight and bias are [D], initialized to ones and zeros, present only with
// elementwise_affine. Computed by the device's NormOps (statistics in double). Forward saves its
// input (shared storage, no copy) and the ops' small f32 [rows, kLayerNormStatsPerRow]
// statistics, in evaluation too.
#ifndef GPIPE_LAYERS_LAYER_NORM_H_
#define GPIPE_LAYERS_LAYER_NORM_H_

#include <memory>

#include "layers/layer.h"
#include "layers/split_backward_layer.h"
#include "proto/plan.pb.h"
#include "runtime/device/ops/norm_ops.h"

namespace gpipe {

class LayerNorm final : public SplitBackwardLayer {
 public:
  // Fails with INVALID_ARGUMENT when layer_norm.eps is not > 0 or the input has no last
  // dimension >= 1.
  static absl::StatusOr<std::unique_ptr<Layer>> Create(const pb::Layer& spec,
                                                       const Shape& input_shape);

  std::string_view type() const override { return "layer_norm"; }
  std::vector<ParamSpec> parameter_specs() const override;
  double ForwardFlopsPerSample() const override;
  absl::StatusOr<Tensor> Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                 const Tensor& x, SavedTensors& saved) const override;
  // {kInput, kNew: 12 bytes per row of a sample (the statistics)}.
  std::vector<SavedSpec> SavedPerSample() const override;
  // Splits only with elementwise_affine: without parameters there is no W. Both halves still
  // work either way (BackwardWeight then does nothing).
  const SplitBackward* split_backward() const override { return affine_ ? this : nullptr; }
  absl::StatusOr<Tensor> BackwardInput(const LayerContext& ctx, std::span<const Tensor> params,
                                       const SavedTensors& saved, const Tensor& dy) const override;
  absl::Status BackwardWeight(const LayerContext& ctx, std::span<Tensor> grads,
                              const SavedTensors& saved, const Tensor& dy) const override;

 private:
  LayerNorm(std::string name, const Shape& input_shape, double eps, bool affine);
  // Checks that `saved` holds a Forward's input and statistics and dy matches that input.
  absl::Status CheckOutputGrad(const SavedTensors& saved, const Tensor& dy) const;
  // dweight += sum over rows of dy * xhat; dbias += sum over rows of dy (affine only).
  absl::Status AccumulateParamGrads(const LayerContext& ctx, std::span<Tensor> grads,
                                    const SavedTensors& saved, const Tensor& dy) const;
  // The ops' arguments for `rows` rows (weight and bias from params when affine and given).
  LayerNormArgs Args(std::span<const Tensor> params, int64_t rows) const;
  // dx (undefined when !ctx.need_input_grad).
  absl::StatusOr<Tensor> InputGrad(const LayerContext& ctx, std::span<const Tensor> params,
                                   const SavedTensors& saved, const Tensor& dy) const;
  int64_t features_;
  double eps_;
  bool affine_;
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_LAYER_NORM_H_

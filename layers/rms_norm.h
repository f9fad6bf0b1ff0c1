// RmsNorm: root-mean-square norm over the last dimension D (Hugging Face's LlamaRMSNorm, in f32):
//   y = x / sqrt(mean(x^2) + eps) * weight.
// weight is [D], initialized to ones. Computed by the device's NormOps (the mean square in
// double). Forward saves its input (shared storage, no copy) and one f32 rstd per row, in
// evaluation too.
#ifndef GPIPE_LAYERS_RMS_NORM_H_
#define GPIPE_LAYERS_RMS_NORM_H_

#include <memory>
#include <string>

#include "layers/split_backward_layer.h"
#include "proto/plan.pb.h"
#include "runtime/device/ops/norm_ops.h"

namespace gpipe {

class RmsNorm final : public SplitBackwardLayer {
 public:
  // Fails with INVALID_ARGUMENT when rms_norm.eps is not > 0 and finite or the input has no last
  // dimension >= 1.
  static absl::StatusOr<std::unique_ptr<Layer>> Create(const pb::Layer& spec,
                                                       const Shape& input_shape);

  std::string_view type() const override { return "rms_norm"; }
  std::vector<ParamSpec> parameter_specs() const override;
  double ForwardFlopsPerSample() const override;
  absl::StatusOr<Tensor> Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                 const Tensor& x, SavedTensors& saved) const override;
  // {kInput, kNew: 4 bytes per row of a sample (rstd)}.
  std::vector<SavedSpec> SavedPerSample() const override;
  absl::StatusOr<Tensor> BackwardInput(const LayerContext& ctx, std::span<const Tensor> params,
                                       const SavedTensors& saved, const Tensor& dy) const override;
  absl::Status BackwardWeight(const LayerContext& ctx, std::span<Tensor> grads,
                              const SavedTensors& saved, const Tensor& dy) const override;

 private:
  RmsNorm(std::string name, const Shape& input_shape, double eps);
  // Checks that `saved` holds a Forward's input and rstd and dy matches that input.
  absl::Status CheckOutputGrad(const SavedTensors& saved, const Tensor& dy) const;
  RmsNormArgs Args(const Tensor& weight, int64_t rows) const;

  int64_t features_;
  double eps_;
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_RMS_NORM_H_

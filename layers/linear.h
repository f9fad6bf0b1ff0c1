// Linear: y = x W^T + b over the last dimension (torch.nn.Linear).
// weight [out_features, in_features], bias [out_features]; both U(-1/sqrt(in), 1/sqrt(in)).
#ifndef GPIPE_LAYERS_LINEAR_H_
#define GPIPE_LAYERS_LINEAR_H_

#include <memory>

#include "layers/layer.h"
#include "layers/split_backward_layer.h"
#include "proto/plan.pb.h"

namespace gpipe {

class Linear final : public SplitBackwardLayer {
 public:
  static absl::StatusOr<std::unique_ptr<Layer>> Create(const pb::Layer& spec,
                                                       const Shape& input_shape);

  std::string_view type() const override { return "linear"; }
  // Its input only enters products (x W^T forward, dy^T x for the weight gradient).
  bool TakesBf16Inputs() const override { return true; }
  // Its output gradient enters products (dy W, dy^T x) and the bias gradient's exact sum.
  bool TakesBf16OutputGrads() const override { return true; }
  std::vector<ParamSpec> parameter_specs() const override;
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
  Linear(std::string name, Shape input_shape, int64_t out_features, bool bias);
  // Checks that `saved` holds a Forward's input and dy matches that Forward's output (f32, or
  // bf16 under ProductPrecision::kBF16).
  absl::Status CheckOutputGrad(const LayerContext& ctx, const SavedTensors& saved,
                               const Tensor& dy) const;
  // dW += dy^T x; db += sum over rows of dy.
  absl::Status AccumulateParamGrads(const LayerContext& ctx, std::span<Tensor> grads,
                                    const Tensor& x, const Tensor& dy) const;
  // dx = dy W (undefined when !ctx.need_input_grad).
  absl::StatusOr<Tensor> InputGrad(const LayerContext& ctx, std::span<const Tensor> params,
                                   const Tensor& x, const Tensor& dy) const;

  int64_t in_features_;
  int64_t out_features_;
  bool bias_;
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_LINEAR_H_

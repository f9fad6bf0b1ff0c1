// GatedMlp: Hugging Face's LlamaMLP over [.., D], the feed-forward half of llama_block:
//   y = down_proj(silu(gate_proj(x)) * up_proj(x))
// with gate_proj.weight and up_proj.weight [I, D] and down_proj.weight [D, I] (I the
// intermediate size), no biases, N(0, 0.02^2) (transformers' initializer_range).
// Forward saves x (shared), gate_proj(x) and up_proj(x) (as LayerContext::
// saved_activation_dtype); Backward recomputes the product silu(gate) * up for down_proj's
// weight gradient instead of keeping it. Under bf16 storage (training.precision BF16) gate, up,
// the product and the gradients between the products are bf16, as PyTorch autocast keeps them:
// the products write them rounded, and the gating reads gate and up rounded (forward and
// backward alike) and its output gradient rounded; where they only enter products nothing else
// changes (rounded there anyway).
#ifndef GPIPE_LAYERS_GATED_MLP_H_
#define GPIPE_LAYERS_GATED_MLP_H_

#include <memory>
#include <string>

#include "layers/layer.h"

namespace gpipe {

class GatedMlp final : public Layer {
 public:
  // INVALID_ARGUMENT for an input without a last dimension >= 1 or intermediate_size < 1.
  static absl::StatusOr<std::unique_ptr<Layer>> Create(std::string name, const Shape& input_shape,
                                                       int64_t intermediate_size);

  std::string_view type() const override { return "gated_mlp"; }
  // Its backward reads the saved x only as a product operand and gate and up through ops that
  // take bf16.
  bool TakesBf16Saved() const override { return true; }
  std::vector<ParamSpec> parameter_specs() const override;
  // The three products and the gating.
  double ForwardFlopsPerSample() const override;
  absl::StatusOr<Tensor> Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                 const Tensor& x, SavedTensors& saved) const override;
  absl::StatusOr<Tensor> Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                  std::span<Tensor> grads, const SavedTensors& saved,
                                  const Tensor& dy) const override;
  // {kInput (x), kNew gate, kNew up (rows * I activation values each)}.
  std::vector<SavedSpec> SavedPerSample() const override;

 private:
  GatedMlp(std::string name, const Shape& input_shape, int64_t intermediate_size);

  enum Param { kGate = 0, kUp = 1, kDown = 2 };
  // [batch, input rows..., I]: x's shape with the last dimension I.
  Shape HiddenShape(const Shape& x_shape) const;
  // What gate, up, their product and the gradients between the products are kept as: bf16
  // under bf16 storage, else f32.
  static DType InnerDType(const LayerContext& ctx);

  int64_t features_;      // D
  int64_t intermediate_;  // I
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_GATED_MLP_H_

// TransformerBlock: a pre-LayerNorm transformer block over per-sample [T, D] (GPT-2):
//   h = x + attn(ln_1(x)),  y = h + mlp(ln_2(h)),  mlp(z) = proj(gelu(fc(z))),
// attn a causal_self_attention layer. Built from those layers (two residuals of a layer_norm
// and the attention or the MLP), so it computes, saves and backpropagates exactly as they do.
// Parameters, prefixed by the block's name: ln_1.{weight,bias}, attn.qkv.{weight,bias},
// attn.proj.{weight,bias}, ln_2.{weight,bias}, mlp.fc.{weight,bias} ([hidden, D]),
// mlp.proj.{weight,bias} ([D, hidden]), hidden = mlp_ratio * D.
// Under bf16 storage (LayerContext::saved_activation_dtype) what the block keeps for backward is
// bf16 but for the norms' statistics and attention's log-sum-exp. Of those bf16 values, ln_1's
// and ln_2's outputs, qkv and gelu's output are read only as product operands (rounded to bf16
// there anyway: no bit changes); two are read in f32 by the backward and so change its
// arithmetic against keeping them f32: h = x + attn(...) in ln_2's backward (x_hat is rebuilt
// from the rounded h, the statistics are the f32 ones) and O in the fused attention backward's
// D = rowsum(dO * O). Between mlp.fc and mlp.proj the gelu passes bf16 through
// (Layer::KeepsBf16), as PyTorch autocast computes it: it reads mlp.fc's output rounded (forward
// and derivative alike), and in the backward gets mlp.proj's input gradient rounded and hands
// mlp.fc a bf16 gradient (whose bias gradient then sums the rounded values). So bf16 moves the
// loss by the gelu's rounded input, and the gradients by bf16 rounding.
#ifndef GPIPE_LAYERS_TRANSFORMER_BLOCK_H_
#define GPIPE_LAYERS_TRANSFORMER_BLOCK_H_

#include <memory>
#include <string>

#include "layers/layer.h"
#include "layers/layer_builder.h"
#include "layers/layer_sequence.h"
#include "proto/plan.pb.h"

namespace gpipe {

class TransformerBlock final : public Layer {
 public:
  // INVALID_ARGUMENT for an input that is not [T, D], num_heads not dividing D, mlp_ratio < 1 or
  // eps <= 0 (naming the field).
  static absl::StatusOr<std::unique_ptr<Layer>> Create(const pb::Layer& spec,
                                                       const Shape& input_shape,
                                                       InnerLayerBuilder build_inner);

  std::string_view type() const override { return "transformer_block"; }
  // Its body widens per inner layer what that layer reads in f32 (LayerSequence).
  bool TakesBf16Saved() const override { return true; }
  std::vector<ParamSpec> parameter_specs() const override { return body_.parameter_specs(); }
  std::vector<ParamSpec> buffer_specs() const override { return body_.buffer_specs(); }
  double ForwardFlopsPerSample() const override { return body_.ForwardFlopsPerSample(); }
  absl::StatusOr<Tensor> Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                 const Tensor& x, SavedTensors& saved) const override;
  absl::StatusOr<Tensor> Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                  std::span<Tensor> grads, const SavedTensors& saved,
                                  const Tensor& dy) const override;
  std::vector<SavedSpec> SavedPerSample() const override { return body_.SavedPerSample(); }

 private:
  TransformerBlock(std::string name, LayerSequence body);

  LayerSequence body_;  // the two residuals
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_TRANSFORMER_BLOCK_H_

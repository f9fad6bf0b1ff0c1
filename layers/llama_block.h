// LlamaBlock: a pre-RMSNorm decoder block over per-sample [T, D] with the semantics of Hugging
// Face's LlamaDecoderLayer:
//   h = x + self_attn(input_layernorm(x)),  y = h + mlp(post_attention_layernorm(h)),
// self_attn a LlamaAttention (rotary, grouped-query, causal) and mlp a GatedMlp (SwiGLU).
// Built from those layers (two residuals of an rms_norm and the attention or the MLP), so it
// computes, saves and backpropagates exactly as they do. Parameters, prefixed by the block's
// name: input_layernorm.weight, self_attn.{q_proj,k_proj,v_proj,o_proj}.weight,
// post_attention_layernorm.weight, mlp.{gate_proj,up_proj,down_proj}.weight: a plan whose block
// is named `model.layers.3` has exactly the parameter names of a transformers checkpoint.
#ifndef GPIPE_LAYERS_LLAMA_BLOCK_H_
#define GPIPE_LAYERS_LLAMA_BLOCK_H_

#include <memory>
#include <string>

#include "layers/layer.h"
#include "layers/layer_sequence.h"
#include "proto/plan.pb.h"

namespace gpipe {

class LlamaBlock final : public Layer {
 public:
  // INVALID_ARGUMENT, naming the field, for an input that is not [T, D], num_heads unset or not
  // dividing D, an odd head_dim, num_kv_heads not dividing num_heads, intermediate_size unset or
  // < 1, rope_theta or eps not > 0.
  static absl::StatusOr<std::unique_ptr<Layer>> Create(const pb::Layer& spec,
                                                       const Shape& input_shape);

  std::string_view type() const override { return "llama_block"; }
  // Its inner sequence widens saved tensors per inner layer (LayerSequence).
  bool TakesBf16Saved() const override { return true; }
  std::vector<ParamSpec> parameter_specs() const override { return body_.parameter_specs(); }
  double ForwardFlopsPerSample() const override { return body_.ForwardFlopsPerSample(); }
  absl::StatusOr<Tensor> Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                 const Tensor& x, SavedTensors& saved) const override;
  absl::StatusOr<Tensor> Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                  std::span<Tensor> grads, const SavedTensors& saved,
                                  const Tensor& dy) const override;
  std::vector<SavedSpec> SavedPerSample() const override { return body_.SavedPerSample(); }

 private:
  LlamaBlock(std::string name, LayerSequence body);

  LayerSequence body_;  // the two residuals
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_LLAMA_BLOCK_H_

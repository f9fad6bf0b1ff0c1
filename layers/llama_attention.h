// LlamaAttention: Hugging Face's LlamaAttention over [T, D] (eager semantics, no dropout, no
// biases), the attention half of llama_block:
//   q = x Wq^T [T, H*d], k = x Wk^T, v = x Wv^T [T, KV*d]    (d = D / H, KV key/value heads)
//   O = causal softmax(rope(q) rope(k)^T / sqrt(d)) v, query head h reading key/value head
//       h / (H / KV) (grouped-query attention; KV = H is plain multi-head attention)
//   y = O Wo^T
// rope is the rotary position embedding in the rotate-half convention (AttentionOps'
// RotaryQkvArgs). Parameters q_proj.weight [H*d, D], k_proj.weight and v_proj.weight [KV*d, D],
// o_proj.weight [D, H*d], N(0, 0.02^2) (transformers' initializer_range).
// The attention itself is AttentionOps' fused causal kernel: PackRotaryQkv rotates q and k and
// repeats the key/value heads into the kernel's qkv layout (as transformers' repeat_kv), so the
// repeated [T, 3D] block lives only inside a Forward or Backward call.
// Forward saves x (shared), q, k and v before rotation, one log-sum-exp per head and position,
// and O; Backward packs q, k, v again. Under bf16 storage (LayerContext::saved_activation_dtype)
// q, k, v and O are kept bf16: the backward rotates the rounded q and k, so its rebuilt scores
// differ from the forward's by that rounding (the forward rounded the rotated values as product
// operands). With bf16 products too, the packed qkv, O, dO and dqkv are bf16 tensors
// (AttentionOperandDType), so the fused attention's bf16 calls take them as they are (on CUDA
// under runtime.cuda.cudnn_attention, cuDNN's): O, dO and the packed q, k, v are the values the
// products rounded anyway, so the forward and the output projection keep their bits; dq, dk and
// dv are unpacked from dqkv rounded to bf16 (PyTorch autocast's sdpa returns them bf16 too), so
// they and what follows from them (the projections' gradients, dx) differ from f32 unpacking
// by that rounding.
#ifndef GPIPE_LAYERS_LLAMA_ATTENTION_H_
#define GPIPE_LAYERS_LLAMA_ATTENTION_H_

#include <memory>
#include <string>

#include "layers/layer.h"
#include "runtime/device/ops/attention_ops.h"

namespace gpipe {

struct LlamaAttentionConfig {
  int64_t num_heads = 1;
  int64_t num_kv_heads = 1;
  double rope_theta = 10000.0;
};

class LlamaAttention final : public Layer {
 public:
  // INVALID_ARGUMENT for an input that is not [T, D], num_heads < 1 or not dividing D, an odd
  // head_dim, num_kv_heads < 1 or not dividing num_heads, or rope_theta not > 0.
  static absl::StatusOr<std::unique_ptr<Layer>> Create(std::string name, const Shape& input_shape,
                                                       const LlamaAttentionConfig& config);

  std::string_view type() const override { return "llama_attention"; }
  std::vector<ParamSpec> parameter_specs() const override;
  // The four projections and the two attention products over the full T x T (model FLOPs).
  double ForwardFlopsPerSample() const override;
  absl::StatusOr<Tensor> Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                 const Tensor& x, SavedTensors& saved) const override;
  absl::StatusOr<Tensor> Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                  std::span<Tensor> grads, const SavedTensors& saved,
                                  const Tensor& dy) const override;
  // {kInput (x), kNew q (T*D activation values), kNew k, kNew v (T*KV*d each), kNew log-sum-exp
  // (H*T f32), kNew O (T*D activation values)}.
  std::vector<SavedSpec> SavedPerSample() const override;

 private:
  LlamaAttention(std::string name, const Shape& input_shape, const LlamaAttentionConfig& config);

  enum Param { kQ = 0, kK = 1, kV = 2, kO = 3 };
  RotaryQkvArgs RotaryArgs(int64_t batch) const;
  FusedAttentionArgs AttentionArgs(int64_t batch, ProductPrecision precision) const;
  // rope(q) | repeat(rope(k)) | repeat(v) as a new workspace tensor [batch, T, 3D] of `dtype`.
  absl::StatusOr<Tensor> Packed(Device& device, const Tensor& q, const Tensor& k, const Tensor& v,
                                DType dtype) const;

  int64_t positions_;  // T
  int64_t features_;   // D
  int64_t head_dim_;   // d
  int64_t kv_width_;   // KV * d
  LlamaAttentionConfig config_;
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_LLAMA_ATTENTION_H_

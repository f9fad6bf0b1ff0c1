// CausalSelfAttention: GPT-2's multi-head causal self-attention over [T, D], without dropout.
//   qkv = x Wqkv^T + bqkv                     (queries, keys, values, each [T, D], in that order)
//   per head h (columns h*dh .. (h+1)*dh, dh = D / num_heads):
//     P = softmax(q k^T / sqrt(dh) with s > t masked out),  O_h = P v
//   y = O Wproj^T + bproj                     (O = the heads side by side, [T, D])
// Parameters qkv.weight [3D, D], qkv.bias [3D], proj.weight [D, D], proj.bias [D] (biases only
// with `bias`), U(-1/sqrt(D), 1/sqrt(D)) as torch.nn.Linear. Every product is a strided
// The projections are Dense GEMMs; the attention itself is AttentionOps' fused causal kernel
// reading the heads in place from qkv [T, 3D] (no [T, T] matrix is kept from Forward to Backward).
// Forward saves x (shared), qkv, one log-sum-exp per head and position, and O, in evaluation
// too, so the saved bytes grow linearly in T; Backward recomputes P from them and runs whole
// (no split). Under bf16 storage (LayerContext::saved_activation_dtype) qkv and O are kept as
// bf16 and the log-sum-exp as f32; qkv, O, dO and dqkv are then bf16 throughout, written rounded
// by the products that make them and read as they are by those that use them. Against f32
// inner tensors (with qkv and O kept rounded), the one sum that sees a new rounding is the qkv
// bias gradient: it sums dqkv rounded to bf16 (as PyTorch autocast's bf16 dqkv); every other
// value keeps its bits.
#ifndef GPIPE_LAYERS_CAUSAL_SELF_ATTENTION_H_
#define GPIPE_LAYERS_CAUSAL_SELF_ATTENTION_H_

#include <memory>

#include "layers/layer.h"
#include "proto/plan.pb.h"
#include "runtime/device/ops/attention_ops.h"

namespace gpipe {

class CausalSelfAttention final : public Layer {
 public:
  // Fails with INVALID_ARGUMENT when causal_self_attention.num_heads is unset, < 1 or does not
  // divide D, or the input is not [T, D].
  static absl::StatusOr<std::unique_ptr<Layer>> Create(const pb::Layer& spec,
                                                       const Shape& input_shape);

  std::string_view type() const override { return "causal_self_attention"; }
  // Its input only enters products (the qkv projection and its weight gradient): at
  // ProductPrecision::kBF16 it takes a bf16 x as it is, with the same bits as its f32 widening
  // (and so its bf16 saved qkv and O: TakesBf16Saved).
  bool TakesBf16Inputs() const override { return true; }
  // dy only enters products and the projection's bias gradient (summed in f32 from its exact
  // widening): a bf16 dy gives the bits of its f32 widening.
  bool TakesBf16OutputGrads() const override { return true; }
  std::vector<ParamSpec> parameter_specs() const override;
  // The four products, the score and P v ones counted over the full T x T (model FLOPs).
  double ForwardFlopsPerSample() const override;
  absl::StatusOr<Tensor> Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                 const Tensor& x, SavedTensors& saved) const override;
  absl::StatusOr<Tensor> Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                  std::span<Tensor> grads, const SavedTensors& saved,
                                  const Tensor& dy) const override;
  // {kInput (x), kNew qkv (3*T*D activation values), kNew log-sum-exp (H*T f32), kNew O (T*D
  // activation values)}: qkv and O are kept as LayerContext::saved_activation_dtype.
  std::vector<SavedSpec> SavedPerSample() const override;

 private:
  CausalSelfAttention(std::string name, const Shape& input_shape, int64_t num_heads, bool bias);

  // Indices into params/grads.
  int qkv_weight() const { return 0; }
  int qkv_bias() const { return 1; }
  int proj_weight() const { return bias_ ? 2 : 1; }
  int proj_bias() const { return 3; }

  // The fused attention's geometry for `batch` samples.
  FusedAttentionArgs AttentionArgs(int64_t batch, ProductPrecision precision) const;

  int64_t positions_;  // T
  int64_t features_;   // D
  int64_t num_heads_;  // H
  int64_t head_dim_;   // D / H
  bool bias_;
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_CAUSAL_SELF_ATTENTION_H_

// CausalSelfAttention: GPT-2's multi-head causal self-attention over [T, D], without dropout.
//   qkv = x Wqkv^T + bqkv                     (queries, keys, values, each [T, D], in that order)
//   per head h (columns h*dh .. (h+1)*dh, dh = D / num_heads):
//     P = softmax(q k^T / sqrt(dh) with s > t masked out),  O_h = P v
//   y = O Wproj^T + bproj                     (O = the heads side by side, [T, D])
// Parameters qkv.weight [3D, D], qkv.bias [3D], proj.weight [D, D], proj.bias [D] (biases only
// with `bias`), U(-1/sqrt(D), 1/sqrt(D)) as torch.nn.Linear. Every product is a strided
// MatmulOps::Gemm batched over the heads (a head is a column block of qkv or O, so no copies),
// the softmax is AttentionOps. Forward saves x (shared), qkv, the probabilities P and O, in
// evaluation too; Backward runs whole (no split).
#ifndef GPIPE_LAYERS_CAUSAL_SELF_ATTENTION_H_
#define GPIPE_LAYERS_CAUSAL_SELF_ATTENTION_H_

#include <memory>

#include "layers/layer.h"
#include "proto/plan.pb.h"
#include "runtime/device/ops/matmul_ops.h"

namespace gpipe {

class CausalSelfAttention final : public Layer {
 public:
  // Fails with INVALID_ARGUMENT when causal_self_attention.num_heads is unset, < 1 or does not
  // divide D, or the input is not [T, D].
  static absl::StatusOr<std::unique_ptr<Layer>> Create(const pb::Layer& spec,
                                                       const Shape& input_shape);

  std::string_view type() const override { return "causal_self_attention"; }
  std::vector<ParamSpec> parameter_specs() const override;
  // The four GEMMs, with the score and P v products counted over the full T x T (as computed).
  double ForwardFlopsPerSample() const override;
  absl::StatusOr<Tensor> Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                 const Tensor& x, SavedTensors& saved) const override;
  absl::StatusOr<Tensor> Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                  std::span<Tensor> grads, const SavedTensors& saved,
                                  const Tensor& dy) const override;
  // {kInput (x), kNew qkv (3*T*D f32), kNew P (H*T*T f32), kNew O (T*D f32)}.
  std::vector<SavedSpec> SavedPerSample() const override;

 private:
  CausalSelfAttention(std::string name, const Shape& input_shape, int64_t num_heads, bool bias);

  // Indices into params/grads.
  int qkv_weight() const { return 0; }
  int qkv_bias() const { return 1; }
  int proj_weight() const { return bias_ ? 2 : 1; }
  int proj_bias() const { return 3; }

  // Sample `sample`'s queries (part 0), keys (1) or values (2) of qkv [batch, T, 3D], as H
  // matrices [T, dh] batched over the heads.
  MatrixView QkvHeads(const Tensor& qkv, int64_t sample, int part) const;
  // Sample `sample`'s rows of O (or dO) [batch, T, D] as H matrices [T, dh].
  MatrixView HeadColumns(const Tensor& heads, int64_t sample) const;
  // Sample `sample`'s H blocks [T, T] of a [batch, H, T, T] tensor.
  MatrixView ScoreBlocks(const Tensor& scores, int64_t sample) const;
  // d(qkv) of one sample from dO, given the saved qkv and P; `scores_grad` is [H, T, T] scratch.
  absl::Status AttendSampleBackward(Device& device, ProductPrecision precision, const Tensor& qkv,
                                    const Tensor& probs, const Tensor& heads_grad, int64_t sample,
                                    Tensor& scores_grad, Tensor& qkv_grad) const;

  int64_t positions_;  // T
  int64_t features_;   // D
  int64_t num_heads_;  // H
  int64_t head_dim_;   // D / H
  bool bias_;
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_CAUSAL_SELF_ATTENTION_H_

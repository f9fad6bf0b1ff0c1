// AttentionOps: causal self-attention's non-GEMM kernels. The causal softmax over score rows
// (forward and backward) works on materialized [t, t] blocks; the fused causal attention
// computes softmax(scale q k^T) v and its gradients from qkv, keeping from forward to backward
// only one log-sum-exp per query row, never a [t, t] block. See
// runtime/device/ops.h for the common contract.
// Each public entry checks its arguments (the same INVALID_ARGUMENT on every backend) and then
// runs the backend's protected Do kernel.
#ifndef GPIPE_RUNTIME_DEVICE_OPS_ATTENTION_OPS_H_
#define GPIPE_RUNTIME_DEVICE_OPS_ATTENTION_OPS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "runtime/core/tensor.h"
#include "runtime/device/ops/product_precision.h"

namespace gpipe {

// The geometry of a fused causal attention call. qkv is f32 [batch, t, 3 * heads * head_dim]
// (GPT-2's c_attn output): row (b, s) holds position s's queries, keys and values side by side,
// head h in columns h * head_dim .. (h + 1) * head_dim of each third. Heads' outputs O are
// [batch, t, heads * head_dim], head h in the same columns.
struct FusedAttentionArgs {
  int64_t batch = 0;
  int64_t t = 0;
  int64_t heads = 1;
  int64_t head_dim = 1;
  float scale = 1.0f;  // scores are scale * (q . k)
  // kBF16: every operand of the five products (q, k, v, dO, the probabilities P, and dS) is
  // rounded to bf16 where it enters the product, with f32 accumulation, as product_precision.h's
  // GEMMs (forward's P is unnormalized on the CPU, normalized on CUDA); the softmax statistics
  // and D stay f32/double. At kBF16 qkv, out, dout and dqkv may also be bf16 tensors (mixed
  // precision's storage): a bf16 input is read as its exact f32 widening (the bits of the f32
  // call on those values) and a bf16 output holds the f32 call's result rounded to nearest even.
  // One exception: the CUDA backend under runtime.cuda.cudnn_attention runs calls whose tensors
  // are all bf16 on cuDNN (runtime/device/cuda/cudnn_attention.h), which agrees with that to
  // bf16 rounding, not bit for bit.
  ProductPrecision precision = ProductPrecision::kF32;
};

// The geometry of Llama's attention input: q f32 [batch, t, heads * head_dim], k and v f32
// [batch, t, kv_heads * head_dim] (kv_heads dividing heads, head_dim even), packed into the
// fused attention's qkv [batch, t, 3 * heads * head_dim] (FusedAttentionArgs) as
// rope(q) | rope(k) repeated | v repeated: query head h reads key/value head h / (heads /
// kv_heads), as Hugging Face's repeat_kv. rope rotates, in each head, the pair (x_i, x_{i+d/2})
// (d = head_dim, i < d/2) at position s by the angle s * inv_freq_i (rotate-half convention):
//   (x_i, x_{i+d/2}) -> (x_i cos - x_{i+d/2} sin, x_{i+d/2} cos + x_i sin),
// inv_freq_i = 1 / rope_theta^(2i/d) and the angle computed in f32 (float(s) * inv_freq_i, as
// transformers' LlamaRotaryEmbedding), cos and sin in double rounded to f32.
struct RotaryQkvArgs {
  int64_t batch = 0;
  int64_t t = 0;
  int64_t heads = 1;
  int64_t kv_heads = 1;
  int64_t head_dim = 2;
  double rope_theta = 10000.0;
};

class AttentionOps {
 public:
  virtual ~AttentionOps() = default;
  // scores: f32 [blocks, t, t], in place: row r of each block becomes the softmax of entries
  // [0, r] (shifted by their maximum, sum in double); entries past r become exact zeros.
  absl::Status CausalSoftmaxForward(int64_t blocks, int64_t t, Tensor& scores) const;
  // grad: f32 [blocks, t, t] holding dP, in place becomes scale * P * (dP - rowsum(dP * P))
  // on the causal entries (row sums in double) and exact zeros past them.
  absl::Status CausalSoftmaxBackward(int64_t blocks, int64_t t, float scale, const Tensor& probs,
                                     Tensor& grad) const;

  // Per (b, h): O = P v with P = softmax over s' <= s of scale q_s . k_s' (causal), written into
  // `out` [batch, t, heads * head_dim] (f32, or bf16 at kBF16, as qkv may be); `logsumexp` f32
  // [batch, heads, t], sharing no storage with qkv or out, gets each row's
  // m + log(sum exp(score - m)) (m its maximum score), all Backward needs to rebuild P.
  // No [t, t] block outlives a call: the CPU works tile by tile (FlashAttention-2 style, a few
  // tiles of workspace whatever t); CUDA holds a chunk of samples' [heads, t, t] scores in
  // workspace for the call (cuda_fused_attention.cc, bounded unless one sample needs more).
  absl::Status FusedCausalForward(const FusedAttentionArgs& args, const Tensor& qkv, Tensor& out,
                                  Tensor& logsumexp) const;
  // Given Forward's qkv, out and logsumexp and dout = dL/dO [batch, t, heads * head_dim],
  // overwrites dqkv [batch, t, 3 * heads * head_dim] with dL/dqkv (dq, dk, dv in qkv's
  // layout). P is recomputed as exp(score - logsumexp); with
  // D_s = rowsum(dO_s * O_s), dS = scale * P * (dP - D), dq = dS k, dk = dS^T q, dv = P^T dO.
  // dqkv must not share storage with an input.
  absl::Status FusedCausalBackward(const FusedAttentionArgs& args, const Tensor& qkv,
                                   const Tensor& out, const Tensor& logsumexp, const Tensor& dout,
                                   Tensor& dqkv) const;

  // Overwrites qkv with rope(q) | repeat(rope(k)) | repeat(v) (see RotaryQkvArgs). qkv may be
  // bf16 (mixed precision's storage, for the fused attention's bf16 calls): the f32 values
  // rounded to nearest even.
  absl::Status PackRotaryQkv(const RotaryQkvArgs& args, const Tensor& q, const Tensor& k,
                             const Tensor& v, Tensor& qkv) const;
  // The transpose of PackRotaryQkv: from dqkv (dL/dqkv), overwrites dq with rope's inverse
  // rotation of dqkv's first third; dv with the sums, over each key/value head's query heads (in
  // head order, in f32), of the last third; and dk with the inverse rotation of the same sums
  // of the middle third. dqkv may be bf16, read as its exact widening.
  absl::Status UnpackRotaryQkvGrad(const RotaryQkvArgs& args, const Tensor& dqkv, Tensor& dq,
                                   Tensor& dk, Tensor& dv) const;

 protected:
  // The backend's kernels, one per entry above, called only with arguments the entry has
  // checked (the same INVALID_ARGUMENT messages on every backend).
  virtual absl::Status DoCausalSoftmaxForward(int64_t blocks, int64_t t, Tensor& scores) const = 0;
  virtual absl::Status DoCausalSoftmaxBackward(int64_t blocks, int64_t t, float scale,
                                               const Tensor& probs, Tensor& grad) const = 0;
  virtual absl::Status DoFusedCausalForward(const FusedAttentionArgs& args, const Tensor& qkv,
                                            Tensor& out, Tensor& logsumexp) const = 0;
  virtual absl::Status DoFusedCausalBackward(const FusedAttentionArgs& args, const Tensor& qkv,
                                             const Tensor& out, const Tensor& logsumexp,
                                             const Tensor& dout, Tensor& dqkv) const = 0;
  virtual absl::Status DoPackRotaryQkv(const RotaryQkvArgs& args, const Tensor& q, const Tensor& k,
                                       const Tensor& v, Tensor& qkv) const = 0;
  virtual absl::Status DoUnpackRotaryQkvGrad(const RotaryQkvArgs& args, const Tensor& dqkv,
                                             Tensor& dq, Tensor& dk, Tensor& dv) const = 0;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_OPS_ATTENTION_OPS_H_

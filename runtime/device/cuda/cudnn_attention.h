// CudnnAttention: the fused causal attention (runtime/device/ops/attention_ops.h) on cuDNN's
// flash-attention engines, described through NVIDIA's header-only cudnn-frontend graph API
// (scaled-dot-product attention with a top-left causal mask, forward with its softmax
// statistics and a deterministic backward). Used by CudaAttentionOps under
// runtime.cuda.cudnn_attention for the calls mixed precision's storage makes: kBF16 products with
// bf16 qkv, O, dO and dqkv.
//
// Why the frontend: cuDNN's backend API has a native SDPA operation without a causal mode, and a
// causal flash attention written against the backend descriptors directly is the frontend's
// graph (matmuls, a generated index mask, softmax statistics, in that engine's pattern) spelled
// out by hand, thousands of lines whose every descriptor would be ours to keep in step with each
// cuDNN release. scripts/cudnn_frontend.sh installs the headers, pinned; a build without them
// (CMake says so) compiles no_cudnn_attention.cc, where Available() is false.
//
// What it computes, beside the kernels of cuda_fused_attention.cc: q, k, v and dO enter the
// products as the bf16 values they are; scores, softmax statistics and accumulators are f32; P
// and dS are rounded to bf16 for their products where cuDNN's engine does it (an online softmax
// over key blocks with a running maximum in the forward), and O and the gradients are rounded
// once to bf16 from f32 accumulators. So results agree with the other path to bf16 rounding, not
// bit for bit; the conformance suite holds both to the same double oracle. The log-sum-exp is the
// same quantity (cuDNN's natural-log softmax statistics of the scaled scores), so either path's
// backward may follow either's forward.
//
// Determinism: each distinct call (direction, batch, t, heads, head_dim, scale) gets its plan
// once, on first use, from cuDNN's heuristic (mode A) and keeps it, so a given shape always runs
// the same engine configuration; the backward asks for a deterministic algorithm (no
// floating-point atomics: dQ summed in a fixed order) and a shape for which cuDNN has none is
// declined rather than run nondeterministically. Same shape, same bits, whatever the stage count.
//
// Memory: the plan's workspace is taken from the context's stream-ordered workspace for each call
// (counted as the device's workspace while it runs); the caller keeps only O and the [batch,
// heads, t] statistics, nothing quadratic in t.
//
// Not thread-safe: one thread issues on a device at a time (the Device contract).
#ifndef GPIPE_RUNTIME_DEVICE_CUDA_CUDNN_ATTENTION_H_
#define GPIPE_RUNTIME_DEVICE_CUDA_CUDNN_ATTENTION_H_

#include <array>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "runtime/core/tensor.h"
#include "runtime/device/cuda/cuda_context.h"
#include "runtime/device/ops/attention_ops.h"

namespace gpipe::cuda {

class CudnnAttention {
 public:
  // Whether this build has cudnn-frontend (false: every call declines).
  static bool Available();

  // `context` must outlive the object. `deterministic` false lets the backward use cuDNN's
  // fastest algorithm, atomics included (for measuring what determinism costs; the runtime
  // always passes true).
  explicit CudnnAttention(const CudaContext& context, bool deterministic = true);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // Issue the forward / backward on the context's stream, given arguments AttentionOps' entries
  // have checked. false, with nothing issued, for a call this class does not take (products
  // other than kBF16, an f32 tensor, an operand not 16-byte aligned: mixed precision's storage
  // is what it is for) or whose shape cuDNN has no engine for (remembered: the heuristic is
  // asked once per shape).
  absl::StatusOr<bool> Forward(const FusedAttentionArgs& args, const Tensor& qkv, Tensor& out,
                               Tensor& logsumexp) const;
  absl::StatusOr<bool> Backward(const FusedAttentionArgs& args, const Tensor& qkv,
                                const Tensor& out, const Tensor& logsumexp, const Tensor& dout,
                                Tensor& dqkv) const;

  // Shapes seen so far (forward and backward counted apart), and how many of them have a plan.
  int64_t shapes() const { return static_cast<int64_t>(plans_.size()); }
  int64_t shapes_with_plan() const;

 private:
  struct Plan;
  // direction (0 forward, 1 backward), batch, t, heads, head_dim, the scale's bits.
  using Key = std::array<int64_t, 6>;
  // The shape's plan, built on first use; null when cuDNN declines the shape.
  absl::StatusOr<const Plan*> PlanFor(bool backward, const FusedAttentionArgs& args) const;
  // Runs the plan on the tensors `pack` names by uid, its workspace taken for the call.
  absl::Status Execute(const Plan& plan, std::unordered_map<int64_t, void*>& pack,
                       const char* direction) const;

  const CudaContext& context_;
  const bool deterministic_;
  mutable absl::flat_hash_map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace gpipe::cuda

#endif  // GPIPE_RUNTIME_DEVICE_CUDA_CUDNN_ATTENTION_H_

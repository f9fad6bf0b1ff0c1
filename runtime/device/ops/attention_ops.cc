#include "runtime/device/ops/attention_ops.h"

#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops/op_checks.h"

namespace gpipe {
namespace {

using op_checks::SquareBlocks;

// batch, t >= 0, heads, head_dim >= 1.
absl::Status FusedGeometry(const char* op, const FusedAttentionArgs& args) {
  if (args.batch < 0 || args.t < 0 || args.heads < 1 || args.head_dim < 1) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": needs batch (", args.batch, ") and t (",
                                                   args.t, ") >= 0, heads (", args.heads,
                                                   ") and head_dim (", args.head_dim, ") >= 1"));
  }
  return absl::OkStatus();
}

// `tensor` (`what`) is a defined f32 tensor of d0 * d1 * d2 elements.
absl::Status F32Of(const char* op, const char* what, int64_t d0, int64_t d1, int64_t d2,
                   const Tensor& tensor) {
  if (!tensor.defined() || tensor.dtype() != DType::kF32 || tensor.num_elements() != d0 * d1 * d2) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", what, " must be f32 [", d0, ", ", d1, ", ", d2, "], got ",
                     tensor.defined() ? tensor.DebugString() : "undefined"));
  }
  return absl::OkStatus();
}

// `tensor` (`what`) is a defined tensor of d0 * d1 * d2 elements, f32 or, at
// ProductPrecision::kBF16, bf16.
absl::Status F32OrBf16Of(const char* op, const char* what, const FusedAttentionArgs& args,
                         int64_t d0, int64_t d1, int64_t d2, const Tensor& tensor) {
  const bool bf16_ok = args.precision == ProductPrecision::kBF16;
  if (!tensor.defined() ||
      !(tensor.dtype() == DType::kF32 || (bf16_ok && tensor.dtype() == DType::kBF16)) ||
      tensor.num_elements() != d0 * d1 * d2) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", what, " must be f32", bf16_ok ? " or bf16" : "", " [", d0, ", ", d1,
                     ", ", d2, "], got ", tensor.defined() ? tensor.DebugString() : "undefined"));
  }
  return absl::OkStatus();
}

// batch, t >= 0, kv_heads >= 1 dividing heads, head_dim even and >= 2, rope_theta > 0.
absl::Status RotaryGeometry(const char* op, const RotaryQkvArgs& args) {
  if (args.batch < 0 || args.t < 0 || args.kv_heads < 1 || args.heads < args.kv_heads ||
      args.heads % args.kv_heads != 0 || args.head_dim < 2 || args.head_dim % 2 != 0 ||
      !(args.rope_theta > 0.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": needs batch (", args.batch, ") and t (", args.t, ") >= 0, kv_heads (",
                     args.kv_heads, ") >= 1 dividing heads (", args.heads, "), an even head_dim (",
                     args.head_dim, ") and rope_theta (", args.rope_theta, ") > 0"));
  }
  return absl::OkStatus();
}

// The four tensors of a pack/unpack call: q-shaped, k-shaped, v-shaped (f32) and qkv-shaped (f32
// or bf16).
absl::Status RotaryOperands(const char* op, const RotaryQkvArgs& args, const char* names[4],
                            const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& qkv) {
  RETURN_IF_ERROR(RotaryGeometry(op, args));
  const int64_t width = args.heads * args.head_dim;
  const int64_t kv_width = args.kv_heads * args.head_dim;
  RETURN_IF_ERROR(F32Of(op, names[0], args.batch, args.t, width, q));
  RETURN_IF_ERROR(F32Of(op, names[1], args.batch, args.t, kv_width, k));
  RETURN_IF_ERROR(F32Of(op, names[2], args.batch, args.t, kv_width, v));
  if (!qkv.defined() || !(qkv.dtype() == DType::kF32 || qkv.dtype() == DType::kBF16) ||
      qkv.num_elements() != args.batch * args.t * 3 * width) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", names[3], " must be f32 or bf16 [", args.batch, ", ", args.t, ", ",
                     3 * width, "], got ", qkv.defined() ? qkv.DebugString() : "undefined"));
  }
  return absl::OkStatus();
}

// `output` (`name`) shares no storage with any of `inputs`.
absl::Status Disjoint(const char* op, const char* name, const Tensor& output,
                      std::initializer_list<const Tensor*> inputs) {
  for (const Tensor* input : inputs) {
    if (output.num_elements() > 0 && output.SharesStorageWith(*input)) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": ", name, " ", output.DebugString(),
                                                     " shares storage with another operand"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status AttentionOps::PackRotaryQkv(const RotaryQkvArgs& args, const Tensor& q,
                                         const Tensor& k, const Tensor& v, Tensor& qkv) const {
  constexpr char kOp[] = "AttentionOps::PackRotaryQkv";
  const char* names[4] = {"q", "k", "v", "qkv"};
  RETURN_IF_ERROR(RotaryOperands(kOp, args, names, q, k, v, qkv));
  RETURN_IF_ERROR(Disjoint(kOp, "qkv", qkv, {&q, &k, &v}));
  return DoPackRotaryQkv(args, q, k, v, qkv);
}

absl::Status AttentionOps::UnpackRotaryQkvGrad(const RotaryQkvArgs& args, const Tensor& dqkv,
                                               Tensor& dq, Tensor& dk, Tensor& dv) const {
  constexpr char kOp[] = "AttentionOps::UnpackRotaryQkvGrad";
  const char* names[4] = {"dq", "dk", "dv", "dqkv"};
  RETURN_IF_ERROR(RotaryOperands(kOp, args, names, dq, dk, dv, dqkv));
  RETURN_IF_ERROR(Disjoint(kOp, "dq", dq, {&dqkv, &dk, &dv}));
  RETURN_IF_ERROR(Disjoint(kOp, "dk", dk, {&dqkv, &dv}));
  RETURN_IF_ERROR(Disjoint(kOp, "dv", dv, {&dqkv}));
  return DoUnpackRotaryQkvGrad(args, dqkv, dq, dk, dv);
}

absl::Status AttentionOps::CausalSoftmaxForward(int64_t blocks, int64_t t, Tensor& scores) const {
  RETURN_IF_ERROR(SquareBlocks("AttentionOps::CausalSoftmaxForward", "scores", blocks, t, scores));
  return DoCausalSoftmaxForward(blocks, t, scores);
}

absl::Status AttentionOps::CausalSoftmaxBackward(int64_t blocks, int64_t t, float scale,
                                                 const Tensor& probs, Tensor& grad) const {
  constexpr char kOp[] = "AttentionOps::CausalSoftmaxBackward";
  RETURN_IF_ERROR(SquareBlocks(kOp, "probs", blocks, t, probs));
  RETURN_IF_ERROR(SquareBlocks(kOp, "grad", blocks, t, grad));
  return DoCausalSoftmaxBackward(blocks, t, scale, probs, grad);
}

absl::Status AttentionOps::FusedCausalForward(const FusedAttentionArgs& args, const Tensor& qkv,
                                              Tensor& out, Tensor& logsumexp) const {
  constexpr char kOp[] = "AttentionOps::FusedCausalForward";
  RETURN_IF_ERROR(FusedGeometry(kOp, args));
  const int64_t width = args.heads * args.head_dim;
  RETURN_IF_ERROR(F32OrBf16Of(kOp, "qkv", args, args.batch, args.t, 3 * width, qkv));
  RETURN_IF_ERROR(F32OrBf16Of(kOp, "out", args, args.batch, args.t, width, out));
  RETURN_IF_ERROR(F32Of(kOp, "logsumexp", args.batch, args.heads, args.t, logsumexp));
  RETURN_IF_ERROR(Disjoint(kOp, "out", out, {&qkv}));
  RETURN_IF_ERROR(Disjoint(kOp, "logsumexp", logsumexp, {&qkv, &out}));
  return DoFusedCausalForward(args, qkv, out, logsumexp);
}

absl::Status AttentionOps::FusedCausalBackward(const FusedAttentionArgs& args, const Tensor& qkv,
                                               const Tensor& out, const Tensor& logsumexp,
                                               const Tensor& dout, Tensor& dqkv) const {
  constexpr char kOp[] = "AttentionOps::FusedCausalBackward";
  RETURN_IF_ERROR(FusedGeometry(kOp, args));
  const int64_t width = args.heads * args.head_dim;
  RETURN_IF_ERROR(F32OrBf16Of(kOp, "qkv", args, args.batch, args.t, 3 * width, qkv));
  RETURN_IF_ERROR(F32OrBf16Of(kOp, "out", args, args.batch, args.t, width, out));
  RETURN_IF_ERROR(F32Of(kOp, "logsumexp", args.batch, args.heads, args.t, logsumexp));
  RETURN_IF_ERROR(F32OrBf16Of(kOp, "dout", args, args.batch, args.t, width, dout));
  RETURN_IF_ERROR(F32OrBf16Of(kOp, "dqkv", args, args.batch, args.t, 3 * width, dqkv));
  for (const Tensor* input : {&qkv, &out, &logsumexp, &dout}) {
    if (dqkv.num_elements() > 0 && dqkv.SharesStorageWith(*input)) {
      return absl::InvalidArgumentError(
          absl::StrCat(kOp, ": dqkv ", dqkv.DebugString(), " shares storage with an input"));
    }
  }
  return DoFusedCausalBackward(args, qkv, out, logsumexp, dout, dqkv);
}

}  // namespace gpipe

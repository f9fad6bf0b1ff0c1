#include "runtime/device/ops/attention_ops.h"

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

}  // namespace

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
  RETURN_IF_ERROR(F32Of(kOp, "qkv", args.batch, args.t, 3 * width, qkv));
  RETURN_IF_ERROR(F32Of(kOp, "out", args.batch, args.t, width, out));
  RETURN_IF_ERROR(F32Of(kOp, "logsumexp", args.batch, args.heads, args.t, logsumexp));
  return DoFusedCausalForward(args, qkv, out, logsumexp);
}

absl::Status AttentionOps::FusedCausalBackward(const FusedAttentionArgs& args, const Tensor& qkv,
                                               const Tensor& out, const Tensor& logsumexp,
                                               const Tensor& dout, Tensor& dqkv) const {
  constexpr char kOp[] = "AttentionOps::FusedCausalBackward";
  RETURN_IF_ERROR(FusedGeometry(kOp, args));
  const int64_t width = args.heads * args.head_dim;
  RETURN_IF_ERROR(F32Of(kOp, "qkv", args.batch, args.t, 3 * width, qkv));
  RETURN_IF_ERROR(F32Of(kOp, "out", args.batch, args.t, width, out));
  RETURN_IF_ERROR(F32Of(kOp, "logsumexp", args.batch, args.heads, args.t, logsumexp));
  RETURN_IF_ERROR(F32Of(kOp, "dout", args.batch, args.t, width, dout));
  RETURN_IF_ERROR(F32Of(kOp, "dqkv", args.batch, args.t, 3 * width, dqkv));
  for (const Tensor* input : {&qkv, &out, &logsumexp, &dout}) {
    if (dqkv.num_elements() > 0 && dqkv.SharesStorageWith(*input)) {
      return absl::InvalidArgumentError(
          absl::StrCat(kOp, ": dqkv ", dqkv.DebugString(), " shares storage with an input"));
    }
  }
  return DoFusedCausalBackward(args, qkv, out, logsumexp, dout, dqkv);
}

}  // namespace gpipe

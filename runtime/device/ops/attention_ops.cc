#include "runtime/device/ops/attention_ops.h"

#include "runtime/core/status_macros.h"
#include "runtime/device/ops/op_checks.h"

namespace gpipe {

using op_checks::SquareBlocks;

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

}  // namespace gpipe

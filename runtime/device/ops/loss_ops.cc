#include "runtime/device/ops/loss_ops.h"

#include "runtime/core/status_macros.h"
#include "runtime/device/ops/loss_checks.h"

namespace gpipe {

absl::Status LossOps::SoftmaxCrossEntropy(const Tensor& logits, const Tensor& ids, double scale,
                                          Tensor& grad, Tensor& totals) const {
  RETURN_IF_ERROR(op_checks::LossTotals("SoftmaxCrossEntropy", totals));
  RETURN_IF_ERROR(op_checks::CrossEntropyArgs(logits, ids, grad));
  return DoSoftmaxCrossEntropy(logits, ids, scale, grad, totals);
}

absl::Status LossOps::MeanSquaredError(const Tensor& output, const Tensor& targets, double scale,
                                       Tensor& grad, Tensor& totals) const {
  RETURN_IF_ERROR(op_checks::LossTotals("MeanSquaredError", totals));
  RETURN_IF_ERROR(op_checks::MeanSquaredErrorArgs(output, targets, grad));
  return DoMeanSquaredError(output, targets, scale, grad, totals);
}

}  // namespace gpipe

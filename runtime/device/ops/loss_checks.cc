#include "runtime/device/ops/loss_checks.h"

#include "absl/strings/str_cat.h"
#include "runtime/device/ops/loss_ops.h"

namespace gpipe::op_checks {

absl::Status LossTotals(const char* op, const Tensor& totals) {
  if (!totals.defined() || totals.dtype() != DType::kF64 ||
      totals.num_elements() != kLossTotalsSize) {
    return absl::InvalidArgumentError(absl::StrCat("LossOps::", op, ": totals must be f64 [",
                                                   kLossTotalsSize, "], got ",
                                                   totals.DebugString()));
  }
  return absl::OkStatus();
}

absl::Status CrossEntropyArgs(const Tensor& logits, const Tensor& ids, const Tensor& grad) {
  if (!logits.defined() || logits.dtype() != DType::kF32 || logits.shape().rank() < 1 ||
      logits.shape().last() < 1 || !ids.defined() || ids.dtype() != DType::kI64 ||
      ids.num_elements() * logits.shape().last() != logits.num_elements() || !grad.defined() ||
      grad.dtype() != DType::kF32 || grad.num_elements() != logits.num_elements()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LossOps::SoftmaxCrossEntropy: logits ", logits.DebugString(), ", ids ", ids.DebugString(),
        ", grad ", grad.DebugString(), " (f32 [rows, classes], i64 [rows], f32 like the logits)"));
  }
  return absl::OkStatus();
}

absl::Status CrossEntropyBadId(BadId bad, int64_t classes) {
  return BadIdError(
      absl::StrCat("row ", bad.index, " has class id ", bad.id, ", outside [0, ", classes, ")"),
      bad);
}

absl::Status MeanSquaredErrorArgs(const Tensor& output, const Tensor& targets, const Tensor& grad) {
  if (!output.defined() || output.dtype() != DType::kF32 || !targets.defined() ||
      targets.dtype() != DType::kF32 || targets.num_elements() != output.num_elements() ||
      !grad.defined() || grad.dtype() != DType::kF32 ||
      grad.num_elements() != output.num_elements()) {
    return absl::InvalidArgumentError(
        absl::StrCat("LossOps::MeanSquaredError: output ", output.DebugString(), ", targets ",
                     targets.DebugString(), ", grad ", grad.DebugString(),
                     " must be f32 with the same element count"));
  }
  return absl::OkStatus();
}

}  // namespace gpipe::op_checks

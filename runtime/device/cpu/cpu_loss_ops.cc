#include "runtime/device/cpu/cpu_loss_ops.h"

#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

absl::Status CheckTotals(const char* op, const Tensor& totals) {
  if (!totals.defined() || totals.dtype() != DType::kF64 ||
      totals.num_elements() != kLossTotalsSize) {
    return absl::InvalidArgumentError(absl::StrCat("LossOps::", op, ": totals must be f64 [",
                                                   kLossTotalsSize, "], got ",
                                                   totals.DebugString()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CpuLossOps::SoftmaxCrossEntropy(const Tensor& logits, const Tensor& ids, double scale,
                                             Tensor& grad, Tensor& totals) const {
  RETURN_IF_ERROR(CheckTotals("SoftmaxCrossEntropy", totals));
  if (!logits.defined() || logits.dtype() != DType::kF32 || logits.shape().rank() < 1 ||
      logits.shape().last() < 1 || !ids.defined() || ids.dtype() != DType::kI64 ||
      ids.num_elements() * logits.shape().last() != logits.num_elements() || !grad.defined() ||
      grad.dtype() != DType::kF32 || grad.num_elements() != logits.num_elements()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LossOps::SoftmaxCrossEntropy: logits ", logits.DebugString(), ", ids ", ids.DebugString(),
        ", grad ", grad.DebugString(), " (f32 [rows, classes], i64 [rows], f32 like the logits)"));
  }
  const int64_t classes = logits.shape().last();
  const int64_t rows = ids.num_elements();
  const int64_t* id = ids.data<int64_t>();
  for (int64_t i = 0; i < rows; ++i) {
    if (id[i] < 0 || id[i] >= classes) {
      return BadIdError(
          absl::StrCat("row ", i, " has class id ", id[i], ", outside [0, ", classes, ")"),
          BadId{.index = i, .id = id[i]});
    }
  }
  const float* x = logits.f32();
  float* g = grad.f32();
  double loss_sum = 0.0;
  int64_t correct = 0;
  for (int64_t i = 0; i < rows; ++i) {
    const float* __restrict row = x + i * classes;
    float* __restrict grad_row = g + i * classes;
    // Ties go to the lowest class id, as torch.argmax.
    int64_t argmax = 0;
    for (int64_t c = 1; c < classes; ++c) {
      if (row[c] > row[argmax]) argmax = c;
    }
    const double max_logit = row[argmax];
    double sum_exp = 0.0;
    for (int64_t c = 0; c < classes; ++c) sum_exp += std::exp(row[c] - max_logit);
    const double log_sum_exp = max_logit + std::log(sum_exp);
    const int64_t target = id[i];
    loss_sum += log_sum_exp - row[target];
    for (int64_t c = 0; c < classes; ++c) {
      const double softmax = std::exp(row[c] - log_sum_exp);
      grad_row[c] = static_cast<float>((softmax - (c == target ? 1.0 : 0.0)) * scale);
    }
    if (argmax == target) ++correct;
  }
  double* total = totals.data<double>();
  total[kLossSum] += loss_sum * scale;
  total[kLossCorrect] += static_cast<double>(correct);
  return absl::OkStatus();
}

absl::Status CpuLossOps::MeanSquaredError(const Tensor& output, const Tensor& targets, double scale,
                                          Tensor& grad, Tensor& totals) const {
  RETURN_IF_ERROR(CheckTotals("MeanSquaredError", totals));
  if (!output.defined() || output.dtype() != DType::kF32 || !targets.defined() ||
      targets.dtype() != DType::kF32 || targets.num_elements() != output.num_elements() ||
      !grad.defined() || grad.dtype() != DType::kF32 ||
      grad.num_elements() != output.num_elements()) {
    return absl::InvalidArgumentError(
        absl::StrCat("LossOps::MeanSquaredError: output ", output.DebugString(), ", targets ",
                     targets.DebugString(), ", grad ", grad.DebugString(),
                     " must be f32 with the same element count"));
  }
  const float* __restrict y = output.f32();
  const float* __restrict t = targets.f32();
  float* __restrict g = grad.f32();
  const int64_t n = output.num_elements();
  double squared_error_sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double diff = static_cast<double>(y[i]) - t[i];
    squared_error_sum += diff * diff;
    g[i] = static_cast<float>(2.0 * diff * scale);
  }
  totals.data<double>()[kLossSum] += squared_error_sum * scale;
  return absl::OkStatus();
}

}  // namespace gpipe

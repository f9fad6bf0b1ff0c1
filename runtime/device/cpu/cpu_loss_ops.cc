#include "runtime/device/cpu/cpu_loss_ops.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <span>

#include "runtime/device/ops/loss_checks.h"

namespace gpipe {

absl::Status CpuLossOps::DoSoftmaxCrossEntropy(const Tensor& logits, const Tensor& ids,
                                               double scale, Tensor& grad, Tensor& totals) const {
  const int64_t classes = logits.shape().last();
  const int64_t rows = ids.num_elements();
  const int64_t* id = ids.data<int64_t>();
  const std::optional<BadId> bad =
      FirstIdOutside(std::span<const int64_t>(id, static_cast<size_t>(rows)), classes);
  if (bad.has_value()) return op_checks::CrossEntropyBadId(*bad, classes);
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

absl::Status CpuLossOps::DoMeanSquaredError(const Tensor& output, const Tensor& targets,
                                            double scale, Tensor& grad, Tensor& totals) const {
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

#include "runtime/device/cpu/cpu_loss_ops.h"

namespace gpipe {

absl::Status CpuLossOps::SoftmaxCrossEntropy(const Tensor& logits, const Tensor& ids, double scale, Tensor& grad, Tensor& totals) const {
  return absl::UnimplementedError("CpuLossOps::SoftmaxCrossEntropy: scaffolding");
}

absl::Status CpuLossOps::MeanSquaredError(const Tensor& output, const Tensor& targets, double scale, Tensor& grad, Tensor& totals) const {
  return absl::UnimplementedError("CpuLossOps::MeanSquaredError: scaffolding");
}

}  // namespace gpipe

// CpuLossOps: the CPU backend's LossOps (see runtime/device/ops/loss_ops.h for the contracts).
#ifndef GPIPE_RUNTIME_DEVICE_CPU_CPU_LOSS_OPS_H_
#define GPIPE_RUNTIME_DEVICE_CPU_CPU_LOSS_OPS_H_

#include "runtime/device/ops/loss_ops.h"

namespace gpipe {

class CpuLossOps final : public LossOps {
 private:
  absl::Status DoSoftmaxCrossEntropy(const Tensor& logits, const Tensor& ids, double scale,
                                     Tensor& grad, Tensor& totals) const override;
  absl::Status DoMeanSquaredError(const Tensor& output, const Tensor& targets, double scale,
                                  Tensor& grad, Tensor& totals) const override;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CPU_CPU_LOSS_OPS_H_

// CpuOptimizerOps: the CPU backend's OptimizerOps (see runtime/device/ops/optimizer_ops.h for the
// contracts).
#ifndef GPIPE_RUNTIME_DEVICE_CPU_CPU_OPTIMIZER_OPS_H_
#define GPIPE_RUNTIME_DEVICE_CPU_CPU_OPTIMIZER_OPS_H_

#include "runtime/device/ops/optimizer_ops.h"

namespace gpipe {

class CpuOptimizerOps final : public OptimizerOps {
 private:
  absl::Status DoSgd(const SgdUpdate& u, Tensor& param, const Tensor& grad,
                     Tensor& momentum_buffer) const override;
  absl::Status DoAdam(const AdamUpdate& u, Tensor& param, const Tensor& grad, Tensor& exp_avg,
                      Tensor& exp_avg_sq) const override;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CPU_CPU_OPTIMIZER_OPS_H_

// CpuActivationOps: the CPU backend's ActivationOps (see runtime/device/ops/activation_ops.h for
// the contracts).
#ifndef GPIPE_RUNTIME_DEVICE_CPU_CPU_ACTIVATION_OPS_H_
#define GPIPE_RUNTIME_DEVICE_CPU_CPU_ACTIVATION_OPS_H_

#include "runtime/device/ops/activation_ops.h"

namespace gpipe {

class CpuActivationOps final : public ActivationOps {
 private:
  absl::Status DoForward(Activation activation, const Tensor& x, Tensor& y) const override;
  absl::Status DoBackward(Activation activation, const Tensor& saved, const Tensor& dy,
                          Tensor& dx) const override;
  absl::Status DoSwiGluForward(const Tensor& gate, const Tensor& up, Tensor& y) const override;
  absl::Status DoSwiGluBackward(const Tensor& gate, const Tensor& up, const Tensor& dy,
                                Tensor& dgate, Tensor& dup) const override;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CPU_CPU_ACTIVATION_OPS_H_

#include "runtime/device/cpu/cpu_activation_ops.h"

namespace gpipe {

absl::Status CpuActivationOps::Forward(Activation activation, const Tensor& x, Tensor& y) const {
  return absl::UnimplementedError("CpuActivationOps::Forward: scaffolding");
}

absl::Status CpuActivationOps::Backward(Activation activation, const Tensor& saved, const Tensor& dy, Tensor& dx) const {
  return absl::UnimplementedError("CpuActivationOps::Backward: scaffolding");
}

}  // namespace gpipe

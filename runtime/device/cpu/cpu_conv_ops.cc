#include "runtime/device/cpu/cpu_conv_ops.h"

namespace gpipe {

absl::Status CpuConvOps::Conv2dForward(const Conv2dGeometry& g, const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor& y) const {
  return absl::UnimplementedError("CpuConvOps::Conv2dForward: scaffolding");
}

absl::Status CpuConvOps::Conv2dBackwardInput(const Conv2dGeometry& g, const Tensor& weight, const Tensor& dy, Tensor& dx) const {
  return absl::UnimplementedError("CpuConvOps::Conv2dBackwardInput: scaffolding");
}

absl::Status CpuConvOps::Conv2dBackwardParams(const Conv2dGeometry& g, const Tensor& x, const Tensor& dy, Tensor& dweight, Tensor& dbias) const {
  return absl::UnimplementedError("CpuConvOps::Conv2dBackwardParams: scaffolding");
}

absl::Status CpuConvOps::Pool2dForward(PoolKind kind, const Conv2dGeometry& g, const Tensor& x, Tensor& y) const {
  return absl::UnimplementedError("CpuConvOps::Pool2dForward: scaffolding");
}

absl::Status CpuConvOps::Pool2dBackward(PoolKind kind, const Conv2dGeometry& g, const Tensor& x, const Tensor& dy, Tensor& dx) const {
  return absl::UnimplementedError("CpuConvOps::Pool2dBackward: scaffolding");
}

}  // namespace gpipe

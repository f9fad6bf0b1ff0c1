// CpuConvOps: the CPU backend's ConvOps (see runtime/device/ops/conv_ops.h for the contracts).
#ifndef GPIPE_RUNTIME_DEVICE_CPU_CPU_CONV_OPS_H_
#define GPIPE_RUNTIME_DEVICE_CPU_CPU_CONV_OPS_H_

#include "runtime/device/cpu/dnnl_context.h"
#include "runtime/device/ops/conv_ops.h"

namespace gpipe {

class CpuConvOps final : public ConvOps {
 public:
  explicit CpuConvOps(DnnlContext& dnnl) : dnnl_(dnnl) {}
  absl::Status Conv2dForward(const Conv2dGeometry& g, const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor& y) const override;
  absl::Status Conv2dBackwardInput(const Conv2dGeometry& g, const Tensor& weight, const Tensor& dy, Tensor& dx) const override;
  absl::Status Conv2dBackwardParams(const Conv2dGeometry& g, const Tensor& x, const Tensor& dy, Tensor& dweight, Tensor& dbias) const override;
  absl::Status Pool2dForward(PoolKind kind, const Conv2dGeometry& g, const Tensor& x, Tensor& y) const override;
  absl::Status Pool2dBackward(PoolKind kind, const Conv2dGeometry& g, const Tensor& x, const Tensor& dy, Tensor& dx) const override;

 private:
  DnnlContext& dnnl_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CPU_CPU_CONV_OPS_H_

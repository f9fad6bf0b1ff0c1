// CpuConvOps: the CPU backend's ConvOps (see runtime/device/ops/conv_ops.h for the contracts).
// Convolutions run as oneDNN primitives on plain NCHW / OIHW memory, created once per geometry
// and cached here; the bias gradient and the pools are loops (cpu_pool_ops.cc) that keep the
// layers' former arithmetic exactly. One thread uses the object at a time (as its device).
#ifndef GPIPE_RUNTIME_DEVICE_CPU_CPU_CONV_OPS_H_
#define GPIPE_RUNTIME_DEVICE_CPU_CPU_CONV_OPS_H_

#include <array>
#include <cstdint>
#include <map>
#include <vector>

#include "oneapi/dnnl/dnnl.hpp"
#include "runtime/device/cpu/dnnl_context.h"
#include "runtime/device/ops/conv_ops.h"

namespace gpipe {

class CpuConvOps final : public ConvOps {
 public:
  explicit CpuConvOps(DnnlContext& dnnl) : dnnl_(dnnl) {}

  absl::Status Conv2dForward(const Conv2dGeometry& g, const Tensor& x, const Tensor& weight,
                             const Tensor& bias, Tensor& y) const override;
  absl::Status Conv2dBackwardInput(const Conv2dGeometry& g, const Tensor& weight,
                                   const Tensor& dy, Tensor& dx) const override;
  absl::Status Conv2dBackwardParams(const Conv2dGeometry& g, const Tensor& x, const Tensor& dy,
                                    Tensor& dweight, Tensor& dbias) const override;
  absl::Status Pool2dForward(PoolKind kind, const Conv2dGeometry& g, const Tensor& x,
                             Tensor& y) const override;
  absl::Status Pool2dBackward(PoolKind kind, const Conv2dGeometry& g, const Tensor& x,
                              const Tensor& y, const Tensor& dy, Tensor& dx) const override;
  absl::Status GlobalAvgPool2dForward(const Tensor& x, Tensor& y) const override;
  absl::Status GlobalAvgPool2dBackward(const Tensor& dy, Tensor& dx) const override;

 private:
  // Every field of a Conv2dGeometry, plus whether the forward adds a bias.
  using GeometryKey = std::array<int64_t, 17>;
  // The primitives of one geometry, each created on first use. The forward descriptor is kept
  // as the hint the backward primitives are created from.
  struct Primitives {
    dnnl::convolution_forward::primitive_desc forward_pd;
    dnnl::convolution_forward forward;
    dnnl::convolution_backward_data backward_data;
    bool has_backward_data = false;
    dnnl::convolution_backward_weights backward_weights;
    bool has_backward_weights = false;
  };

  // The cached primitives of `g` (with_bias: the forward adds a bias). Throws dnnl::error.
  Primitives& PrimitivesFor(const Conv2dGeometry& g, bool with_bias) const;

  DnnlContext& dnnl_;
  mutable std::map<GeometryKey, Primitives> cache_;
  // The weight gradient of one call before it is added to dweight (oneDNN overwrites).
  mutable std::vector<float> weight_grad_scratch_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CPU_CPU_CONV_OPS_H_

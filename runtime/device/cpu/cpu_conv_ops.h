// CpuConvOps: the CPU backend's ConvOps (see runtime/device/ops/conv_ops.h for the contracts).
// Convolutions run as oneDNN primitives created once per geometry and cached here. Wide
// convolutions (>= 16 channels per group each way, a spatial kernel) let oneDNN pick blocked
// layouts, reordering the NCHW tensors into buffers kept per geometry; the others compute on
// the NCHW memory directly (measured faster there: reorders outweigh the gain). The layout is
// chosen by shape alone, so results stay deterministic. The bias gradient and the pools are
// loops (cpu_pool_ops.cc) that keep the layers' former arithmetic exactly. One thread uses the
// object at a time (as its device).
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
  absl::Status Conv2dBackwardInput(const Conv2dGeometry& g, const Tensor& weight, const Tensor& dy,
                                   Tensor& dx) const override;
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
  // Which tensor of a geometry an internal buffer stands for: in any one primitive call each
  // role is a different argument, so the primitives of a geometry share one buffer per role.
  enum Role { kInputShaped = 0, kWeightShaped = 1, kOutputShaped = 2 };
  // The primitives of one geometry, each created on first use (the forward descriptor is the
  // hint the backward ones are created from), and the internal buffers of blocked layouts.
  struct Primitives {
    bool blocked = false;
    dnnl::convolution_forward::primitive_desc forward_pd;
    dnnl::convolution_forward forward;
    dnnl::convolution_backward_data::primitive_desc backward_data_pd;
    dnnl::convolution_backward_data backward_data;
    dnnl::convolution_backward_weights::primitive_desc backward_weights_pd;
    dnnl::convolution_backward_weights backward_weights;
    std::array<dnnl::memory, 3> buffers;  // by Role; empty until a blocked layout needs one
  };

  // The cached primitives of `g` (with_bias: the forward adds a bias), the backward ones
  // created when asked for. Throw dnnl::error.
  Primitives& PrimitivesFor(const Conv2dGeometry& g, bool with_bias) const;
  Primitives& BackwardDataFor(const Conv2dGeometry& g) const;
  Primitives& BackwardWeightsFor(const Conv2dGeometry& g) const;
  // `user` itself when its layout is `wanted`, else the geometry's buffer for `role` in that
  // layout, filled from `user` when `read`.
  dnnl::memory InLayout(Primitives& p, Role role, const dnnl::memory::desc& wanted,
                        const dnnl::memory& user, bool read) const;

  DnnlContext& dnnl_;
  mutable std::map<GeometryKey, Primitives> cache_;
  // The weight gradient of one call before it is added to dweight (oneDNN overwrites).
  mutable std::vector<float> weight_grad_scratch_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CPU_CPU_CONV_OPS_H_

// CpuConvOps: the CPU backend's ConvOps (see runtime/device/ops/conv_ops.h for the contracts).
// Convolutions run as oneDNN primitives created once per geometry and cached here. Wide
// convolutions (>= 16 channels per group each way, a spatial kernel) let oneDNN pick blocked
// layouts, reordering the NCHW tensors into workspace buffers of the call; the others compute on
// the NCHW memory directly (measured faster there: reorders outweigh the gain). The layout is
// chosen by shape alone, so results stay deterministic. At ProductPrecision::kBF16 the operands
// are reordered into bf16 workspace copies (oneDNN's f32 -> bf16 conversion rounds to nearest
// even) for oneDNN's bf16 convolutions, which accumulate and write in f32 (native bf16 dot
// products on CPUs with AVX512_BF16 or AMX). The bias gradient and the pools are
// loops (cpu_pool_ops.cc) that keep the layers' former arithmetic exactly. One thread uses the
// object at a time (as its device).
#ifndef GPIPE_RUNTIME_DEVICE_CPU_CPU_CONV_OPS_H_
#define GPIPE_RUNTIME_DEVICE_CPU_CPU_CONV_OPS_H_

#include <array>
#include <cstdint>
#include <map>
#include <vector>

#include "oneapi/dnnl/dnnl.hpp"
#include "runtime/core/allocator.h"
#include "runtime/device/cpu/dnnl_context.h"
#include "runtime/device/ops/conv_ops.h"

namespace gpipe {

class CpuConvOps final : public ConvOps {
 public:
  // Layout buffers and oneDNN's scratchpad come from `workspace` for the length of one call,
  // counted as MemoryKind::kWorkspace.
  CpuConvOps(DnnlContext& dnnl, Allocator& workspace) : dnnl_(dnnl), workspace_(workspace) {}

 private:
  absl::Status DoConv2dForward(const Conv2dGeometry& g, ProductPrecision precision, const Tensor& x,
                               const Tensor& weight, const Tensor& bias, Tensor& y) const override;
  absl::Status DoConv2dBackwardInput(const Conv2dGeometry& g, ProductPrecision precision,
                                     const Tensor& weight, const Tensor& dy,
                                     Tensor& dx) const override;
  absl::Status DoConv2dBackwardParams(const Conv2dGeometry& g, ProductPrecision precision,
                                      const Tensor& x, const Tensor& dy, Tensor& dweight,
                                      Tensor& dbias) const override;
  absl::Status DoPool2dForward(PoolKind kind, const Conv2dGeometry& g, const Tensor& x,
                               Tensor& y) const override;
  absl::Status DoPool2dBackward(PoolKind kind, const Conv2dGeometry& g, const Tensor& x,
                                const Tensor& y, const Tensor& dy, Tensor& dx) const override;
  absl::Status DoGlobalAvgPool2dForward(const Tensor& x, Tensor& y) const override;
  absl::Status DoGlobalAvgPool2dBackward(const Tensor& dy, Tensor& dx) const override;

  // Every field of a Conv2dGeometry, plus whether the forward adds a bias and the precision
  // (or, for native_bf16_, the direction and whether the forward adds a bias).
  using GeometryKey = std::array<int64_t, 18>;
  enum class Direction : int { kForward, kBackwardData, kBackwardWeights };
  // Every field of `g`, then `a` and `b`.
  static GeometryKey KeyOf(const Conv2dGeometry& g, int64_t a, int64_t b);
  // The primitives of one geometry, each created on first use (the forward descriptor is the
  // hint the backward ones are created from). Their scratchpads are user-provided.
  struct Primitives {
    bool blocked = false;
    dnnl::convolution_forward::primitive_desc forward_pd;
    dnnl::convolution_forward forward;
    dnnl::convolution_backward_data::primitive_desc backward_data_pd;
    dnnl::convolution_backward_data backward_data;
    dnnl::convolution_backward_weights::primitive_desc backward_weights_pd;
    dnnl::convolution_backward_weights backward_weights;
  };

  // The cached primitives of `g` at `precision` (with_bias: the forward adds a bias), the
  // backward ones created when asked for. Throw dnnl::error.
  Primitives& PrimitivesFor(const Conv2dGeometry& g, bool with_bias,
                            ProductPrecision precision) const;
  Primitives& BackwardDataFor(const Conv2dGeometry& g, ProductPrecision precision) const;
  Primitives& BackwardWeightsFor(const Conv2dGeometry& g, ProductPrecision precision) const;
  // Whether oneDNN has an optimized bf16 primitive for `direction` of `g` (cached). Where it
  // has none (no bf16 instructions, or only its reference loops), the op runs its f32
  // primitive on rounded copies of the operands: the same arithmetic, since a product of two
  // bf16 values is exact in f32.
  bool NativeBf16(const Conv2dGeometry& g, Direction direction, bool with_bias) const;
  // A workspace copy of the f32 `tensor` with every element rounded to bf16 (as f32).
  absl::StatusOr<Tensor> RoundedCopy(const Tensor& tensor) const;
  // dbias += the sums of dy per channel when dbias is defined.
  absl::Status AccumulateBiasGrad(const Conv2dGeometry& g, const Tensor& dy, Tensor& dbias) const;
  // `user` itself when its layout is `wanted`, else a workspace buffer in that layout (kept
  // alive in `held` for the call), filled from `user` when `read`. Throws dnnl::error;
  // RESOURCE_EXHAUSTED when the workspace cannot be allocated.
  absl::StatusOr<dnnl::memory> InLayout(const dnnl::memory::desc& wanted, const dnnl::memory& user,
                                        bool read, std::vector<Tensor>& held) const;
  // A workspace buffer of `desc`'s size (kept alive in `held`) as oneDNN memory.
  absl::StatusOr<dnnl::memory> Workspace(const dnnl::memory::desc& desc,
                                         std::vector<Tensor>& held) const;

  DnnlContext& dnnl_;
  Allocator& workspace_;
  mutable std::map<GeometryKey, Primitives> cache_;
  mutable std::map<GeometryKey, bool> native_bf16_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CPU_CPU_CONV_OPS_H_

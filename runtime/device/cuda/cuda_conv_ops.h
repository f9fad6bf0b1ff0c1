// CudaConvOps: ConvOps (runtime/device/ops/conv_ops.h) on the GPU, issued on the context's
// compute stream. Its kernels run after ConvOps' entries have checked their arguments.
#ifndef GPIPE_RUNTIME_DEVICE_CUDA_CUDA_CONV_OPS_H_
#define GPIPE_RUNTIME_DEVICE_CUDA_CUDA_CONV_OPS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "runtime/device/cuda/cuda_context.h"
#include "runtime/device/cuda/cuda_conv_plan.h"
#include "runtime/device/ops/conv_ops.h"

namespace gpipe {

class CudaConvOps final : public ConvOps {
 public:
  explicit CudaConvOps(const CudaContext& context) : context_(context) {}

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

  // The cached plan of `g` at `precision` (bf16 plans allow tensor cores, see the .cu file).
  absl::StatusOr<const CudaConvPlan*> PlanFor(const Conv2dGeometry& g,
                                              ProductPrecision precision) const;
  absl::StatusOr<Tensor> Workspace(size_t bytes) const;
  // `tensor` itself at kF32; at kBF16 a workspace copy rounded to bf16 values (issued on the
  // stream).
  absl::StatusOr<Tensor> Operand(const Tensor& tensor, ProductPrecision precision) const;

  const CudaContext& context_;
  // One entry per geometry and precision seen; ops are used by one thread at a time (the device's).
  mutable absl::flat_hash_map<std::array<int64_t, 17>, std::unique_ptr<CudaConvPlan>> plans_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CUDA_CUDA_CONV_OPS_H_

// CudaTensorOps: TensorOps (runtime/device/ops/tensor_ops.h) on the GPU, issued on the context's
// compute stream. Checks its arguments as the CPU backend does (op_checks.h), before any launch.
#ifndef GPIPE_RUNTIME_DEVICE_CUDA_CUDA_TENSOR_OPS_H_
#define GPIPE_RUNTIME_DEVICE_CUDA_CUDA_TENSOR_OPS_H_

#include "runtime/device/cuda/cuda_context.h"
#include "runtime/device/ops/tensor_ops.h"

namespace gpipe {

class CudaTensorOps final : public TensorOps {
 public:
  explicit CudaTensorOps(const CudaContext& context) : context_(context) {}

  absl::Status Fill(Tensor& out, double value) const override;
  absl::Status Copy(const Tensor& in, Tensor& out) const override;
  absl::Status Add(const Tensor& a, const Tensor& b, Tensor& out) const override;
  absl::Status Axpy(float alpha, const Tensor& x, Tensor& y) const override;
  absl::Status Scale(float alpha, Tensor& x) const override;
  absl::Status Cast(const Tensor& in, Tensor& out) const override;
  absl::Status SumAccumulate(const Tensor& in, int64_t outer, int64_t mid, int64_t inner,
                             Tensor& out) const override;
  absl::Status FillRandom(const RandomKey& key, RandomDistribution distribution, double a, double b,
                          Tensor& out) const override;
  absl::Status DropoutMask(const RandomKey& key, double p, const Tensor& in,
                           Tensor& out) const override;
  absl::Status FlagNonFinite(std::span<const Tensor> tensors, Tensor& flag) const override;

 private:
  const CudaContext& context_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CUDA_CUDA_TENSOR_OPS_H_

// CudaTensorOps: TensorOps (runtime/device/ops/tensor_ops.h) on the GPU, issued on the context's
// compute stream. Its kernels run after TensorOps' entries have checked their arguments.
#ifndef GPIPE_RUNTIME_DEVICE_CUDA_CUDA_TENSOR_OPS_H_
#define GPIPE_RUNTIME_DEVICE_CUDA_CUDA_TENSOR_OPS_H_

#include "runtime/device/cuda/cuda_context.h"
#include "runtime/device/ops/tensor_ops.h"

namespace gpipe {

class CudaTensorOps final : public TensorOps {
 public:
  explicit CudaTensorOps(const CudaContext& context) : context_(context) {}

 private:
  absl::Status DoFill(Tensor& out, double value) const override;
  absl::Status DoCopy(const Tensor& in, Tensor& out) const override;
  absl::Status DoAdd(const Tensor& a, const Tensor& b, Tensor& out) const override;
  absl::Status DoAxpy(float alpha, const Tensor& x, Tensor& y) const override;
  absl::Status DoScale(float alpha, Tensor& x) const override;
  absl::Status DoCast(const Tensor& in, Tensor& out) const override;
  absl::Status DoSumAccumulate(const Tensor& in, int64_t outer, int64_t mid, int64_t inner,
                               Tensor& out) const override;
  absl::Status DoFillRandom(const RandomKey& key, RandomDistribution distribution, double a,
                            double b, Tensor& out) const override;
  absl::Status DoDropoutMask(const RandomKey& key, double p, const Tensor& in,
                             Tensor& out) const override;
  absl::Status DoFlagNonFinite(std::span<const Tensor> tensors, Tensor& flag) const override;
  absl::Status DoSumSquares(std::span<const Tensor> tensors, Tensor& out) const override;

  const CudaContext& context_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CUDA_CUDA_TENSOR_OPS_H_

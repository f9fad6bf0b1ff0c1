// CpuTensorOps: the CPU backend's TensorOps (see runtime/device/ops/tensor_ops.h for the
// contracts): plain loops over host memory that the compiler vectorizes; random numbers from
// runtime/core/rng.h, so every backend draws the same bits.
#ifndef GPIPE_RUNTIME_DEVICE_CPU_CPU_TENSOR_OPS_H_
#define GPIPE_RUNTIME_DEVICE_CPU_CPU_TENSOR_OPS_H_

#include "runtime/device/ops/tensor_ops.h"

namespace gpipe {

class CpuTensorOps final : public TensorOps {
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
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CPU_CPU_TENSOR_OPS_H_

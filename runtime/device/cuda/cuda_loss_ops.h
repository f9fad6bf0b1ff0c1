// CudaLossOps: LossOps (runtime/device/ops/loss_ops.h) on the GPU, issued on the context's
// compute stream. Checks its arguments as the CPU backend does (op_checks.h), before any launch.
#ifndef GPIPE_RUNTIME_DEVICE_CUDA_CUDA_LOSS_OPS_H_
#define GPIPE_RUNTIME_DEVICE_CUDA_CUDA_LOSS_OPS_H_

#include "runtime/device/cuda/cuda_context.h"
#include "runtime/device/ops/loss_ops.h"

namespace gpipe {

class CudaLossOps final : public LossOps {
 public:
  explicit CudaLossOps(const CudaContext& context) : context_(context) {}

  absl::Status SoftmaxCrossEntropy(const Tensor& logits, const Tensor& ids, double scale,
                                   Tensor& grad, Tensor& totals) const override;
  absl::Status MeanSquaredError(const Tensor& output, const Tensor& targets, double scale,
                                Tensor& grad, Tensor& totals) const override;

 private:
  const CudaContext& context_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CUDA_CUDA_LOSS_OPS_H_

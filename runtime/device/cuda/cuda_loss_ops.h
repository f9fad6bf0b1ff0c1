// CudaLossOps: LossOps (runtime/device/ops/loss_ops.h) on the GPU, issued on the context's
// compute stream. Its kernels run after LossOps' entries have checked their operands; the class
// ids' values are checked here (id_check.h), before any launch that uses them.
#ifndef GPIPE_RUNTIME_DEVICE_CUDA_CUDA_LOSS_OPS_H_
#define GPIPE_RUNTIME_DEVICE_CUDA_CUDA_LOSS_OPS_H_

#include "runtime/device/cuda/cuda_context.h"
#include "runtime/device/ops/loss_ops.h"

namespace gpipe {

class CudaLossOps final : public LossOps {
 public:
  explicit CudaLossOps(const CudaContext& context) : context_(context) {}

 private:
  absl::Status DoSoftmaxCrossEntropy(const Tensor& logits, const Tensor& ids, double scale,
                                     Tensor& grad, Tensor& totals) const override;
  absl::Status DoMeanSquaredError(const Tensor& output, const Tensor& targets, double scale,
                                  Tensor& grad, Tensor& totals) const override;

  const CudaContext& context_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CUDA_CUDA_LOSS_OPS_H_

// CudaOptimizerOps: OptimizerOps (runtime/device/ops/optimizer_ops.h) on the GPU, issued on the
// context's compute stream. Its kernels run after OptimizerOps' entries have checked their
// arguments.
#ifndef GPIPE_RUNTIME_DEVICE_CUDA_CUDA_OPTIMIZER_OPS_H_
#define GPIPE_RUNTIME_DEVICE_CUDA_CUDA_OPTIMIZER_OPS_H_

#include "runtime/device/cuda/cuda_context.h"
#include "runtime/device/ops/optimizer_ops.h"

namespace gpipe {

class CudaOptimizerOps final : public OptimizerOps {
 public:
  explicit CudaOptimizerOps(const CudaContext& context) : context_(context) {}

 private:
  absl::Status DoSgd(const SgdUpdate& u, Tensor& param, const Tensor& grad,
                     Tensor& momentum_buffer) const override;
  absl::Status DoAdam(const AdamUpdate& u, Tensor& param, const Tensor& grad, Tensor& exp_avg,
                      Tensor& exp_avg_sq) const override;

  const CudaContext& context_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CUDA_CUDA_OPTIMIZER_OPS_H_

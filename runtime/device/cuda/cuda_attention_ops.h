// CudaAttentionOps: AttentionOps (runtime/device/ops/attention_ops.h) on the GPU, issued on the
// context's compute stream. Checks its arguments as the CPU backend does (op_checks.h), before any
// launch.
#ifndef GPIPE_RUNTIME_DEVICE_CUDA_CUDA_ATTENTION_OPS_H_
#define GPIPE_RUNTIME_DEVICE_CUDA_CUDA_ATTENTION_OPS_H_

#include "runtime/device/cuda/cuda_context.h"
#include "runtime/device/ops/attention_ops.h"

namespace gpipe {

class CudaAttentionOps final : public AttentionOps {
 public:
  explicit CudaAttentionOps(const CudaContext& context) : context_(context) {}

  absl::Status CausalSoftmaxForward(int64_t blocks, int64_t t, Tensor& scores) const override;
  absl::Status CausalSoftmaxBackward(int64_t blocks, int64_t t, float scale, const Tensor& probs,
                                     Tensor& grad) const override;

 private:
  const CudaContext& context_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CUDA_CUDA_ATTENTION_OPS_H_

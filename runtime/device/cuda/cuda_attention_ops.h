// CudaAttentionOps: AttentionOps (runtime/device/ops/attention_ops.h) on the GPU, issued on the
// context's compute stream. Its kernels run after AttentionOps' entries have checked their
// arguments. The fused attention's products go through the device's MatmulOps (cuBLAS), which
// must outlive it. Under runtime.cuda.cudnn_attention the fused attention's bf16-storage calls go
// to cuDNN first (cudnn_attention.h), the kernels taking any call it declines.
#ifndef GPIPE_RUNTIME_DEVICE_CUDA_CUDA_ATTENTION_OPS_H_
#define GPIPE_RUNTIME_DEVICE_CUDA_CUDA_ATTENTION_OPS_H_

#include "runtime/device/cuda/cuda_context.h"
#include "runtime/device/cuda/cudnn_attention.h"
#include "runtime/device/ops/attention_ops.h"
#include "runtime/device/ops/matmul_ops.h"

namespace gpipe {

class CudaAttentionOps final : public AttentionOps {
 public:
  CudaAttentionOps(const CudaContext& context, const MatmulOps& matmul)
      : context_(context), matmul_(matmul), cudnn_(context) {}

 private:
  absl::Status DoCausalSoftmaxForward(int64_t blocks, int64_t t, Tensor& scores) const override;
  absl::Status DoCausalSoftmaxBackward(int64_t blocks, int64_t t, float scale, const Tensor& probs,
                                       Tensor& grad) const override;
  // cuda_fused_attention.cc.
  absl::Status DoFusedCausalForward(const FusedAttentionArgs& args, const Tensor& qkv, Tensor& out,
                                    Tensor& logsumexp) const override;
  absl::Status DoFusedCausalBackward(const FusedAttentionArgs& args, const Tensor& qkv,
                                     const Tensor& out, const Tensor& logsumexp, const Tensor& dout,
                                     Tensor& dqkv) const override;
  // cuda_rotary_qkv.cu.
  absl::Status DoPackRotaryQkv(const RotaryQkvArgs& args, const Tensor& q, const Tensor& k,
                               const Tensor& v, Tensor& qkv) const override;
  absl::Status DoUnpackRotaryQkvGrad(const RotaryQkvArgs& args, const Tensor& dqkv, Tensor& dq,
                                     Tensor& dk, Tensor& dv) const override;

  const CudaContext& context_;
  const MatmulOps& matmul_;
  // Used only when context_.cudnn_attention.
  cuda::CudnnAttention cudnn_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CUDA_CUDA_ATTENTION_OPS_H_

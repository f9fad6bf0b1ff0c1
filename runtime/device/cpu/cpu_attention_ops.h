// CpuAttentionOps: the CPU backend's AttentionOps (contracts in
// runtime/device/ops/attention_ops.h). The causal softmax: plain row loops (float exp, double row
// sums, one float reciprocal per row). The fused attention: cpu_fused_attention.h's tiles, its
// (sample, head) pairs shared by the device's compute threads, its tiles from the device's
// workspace allocator.
#ifndef GPIPE_RUNTIME_DEVICE_CPU_CPU_ATTENTION_OPS_H_
#define GPIPE_RUNTIME_DEVICE_CPU_CPU_ATTENTION_OPS_H_

#include "runtime/core/allocator.h"
#include "runtime/device/ops/attention_ops.h"

namespace gpipe {

class CpuAttentionOps final : public AttentionOps {
 public:
  // `threads` >= 1: the device's compute threads (CpuDeviceOptions::threads). `workspace`
  // (MemoryKind::kWorkspace scratch) must outlive the ops.
  CpuAttentionOps(int threads, Allocator& workspace) : threads_(threads), workspace_(workspace) {}

 private:
  absl::Status DoCausalSoftmaxForward(int64_t blocks, int64_t t, Tensor& scores) const override;
  absl::Status DoCausalSoftmaxBackward(int64_t blocks, int64_t t, float scale, const Tensor& probs,
                                       Tensor& grad) const override;
  absl::Status DoFusedCausalForward(const FusedAttentionArgs& args, const Tensor& qkv, Tensor& out,
                                    Tensor& logsumexp) const override;
  absl::Status DoFusedCausalBackward(const FusedAttentionArgs& args, const Tensor& qkv,
                                     const Tensor& out, const Tensor& logsumexp, const Tensor& dout,
                                     Tensor& dqkv) const override;
  // cpu_rotary_qkv.cc.
  absl::Status DoPackRotaryQkv(const RotaryQkvArgs& args, const Tensor& q, const Tensor& k,
                               const Tensor& v, Tensor& qkv) const override;
  absl::Status DoUnpackRotaryQkvGrad(const RotaryQkvArgs& args, const Tensor& dqkv, Tensor& dq,
                                     Tensor& dk, Tensor& dv) const override;

  int threads_;
  Allocator& workspace_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CPU_CPU_ATTENTION_OPS_H_

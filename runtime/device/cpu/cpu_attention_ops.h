// CpuAttentionOps: the CPU backend's AttentionOps (contracts in
// runtime/device/ops/attention_ops.h): plain row loops with the arithmetic causal self-attention
// has always used (float exp, double row sums, one float reciprocal per row).
#ifndef GPIPE_RUNTIME_DEVICE_CPU_CPU_ATTENTION_OPS_H_
#define GPIPE_RUNTIME_DEVICE_CPU_CPU_ATTENTION_OPS_H_

#include "runtime/device/ops/attention_ops.h"

namespace gpipe {

class CpuAttentionOps final : public AttentionOps {
 private:
  absl::Status DoCausalSoftmaxForward(int64_t blocks, int64_t t, Tensor& scores) const override;
  absl::Status DoCausalSoftmaxBackward(int64_t blocks, int64_t t, float scale, const Tensor& probs,
                                       Tensor& grad) const override;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CPU_CPU_ATTENTION_OPS_H_

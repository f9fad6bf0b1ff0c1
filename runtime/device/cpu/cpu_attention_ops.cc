#include "runtime/device/cpu/cpu_attention_ops.h"

namespace gpipe {

absl::Status CpuAttentionOps::CausalSoftmaxForward(int64_t blocks, int64_t t, Tensor& scores) const {
  return absl::UnimplementedError("CpuAttentionOps::CausalSoftmaxForward: scaffolding");
}

absl::Status CpuAttentionOps::CausalSoftmaxBackward(int64_t blocks, int64_t t, float scale, const Tensor& probs, Tensor& grad) const {
  return absl::UnimplementedError("CpuAttentionOps::CausalSoftmaxBackward: scaffolding");
}

}  // namespace gpipe

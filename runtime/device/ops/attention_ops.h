// AttentionOps: the causal softmax over score rows, forward and backward (the non-GEMM half of
// causal self-attention). See runtime/device/ops.h for the common contract.
#ifndef GPIPE_RUNTIME_DEVICE_OPS_ATTENTION_OPS_H_
#define GPIPE_RUNTIME_DEVICE_OPS_ATTENTION_OPS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "runtime/core/tensor.h"

namespace gpipe {

class AttentionOps {
 public:
  virtual ~AttentionOps() = default;
  // scores: f32 [blocks, t, t], in place: row r of each block becomes the softmax of entries
  // [0, r] (shifted by their maximum, sum in double); entries past r become exact zeros.
  virtual absl::Status CausalSoftmaxForward(int64_t blocks, int64_t t, Tensor& scores) const = 0;
  // grad: f32 [blocks, t, t] holding dP, in place becomes scale * P * (dP - rowsum(dP * P))
  // on the causal entries (row sums in double) and exact zeros past them.
  virtual absl::Status CausalSoftmaxBackward(int64_t blocks, int64_t t, float scale,
                                             const Tensor& probs, Tensor& grad) const = 0;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_OPS_ATTENTION_OPS_H_

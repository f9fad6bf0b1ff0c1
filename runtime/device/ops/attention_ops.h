// AttentionOps: the causal softmax over score rows, forward and backward (the non-GEMM half of
// causal self-attention). See runtime/device/ops.h for the common contract.
// Each public entry checks its arguments (the same INVALID_ARGUMENT on every backend) and then
// runs the backend's protected Do kernel.
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
  absl::Status CausalSoftmaxForward(int64_t blocks, int64_t t, Tensor& scores) const;
  // grad: f32 [blocks, t, t] holding dP, in place becomes scale * P * (dP - rowsum(dP * P))
  // on the causal entries (row sums in double) and exact zeros past them.
  absl::Status CausalSoftmaxBackward(int64_t blocks, int64_t t, float scale, const Tensor& probs,
                                     Tensor& grad) const;

 protected:
  // The backend's kernels, one per entry above, called only with arguments the entry has
  // checked (the same INVALID_ARGUMENT messages on every backend).
  virtual absl::Status DoCausalSoftmaxForward(int64_t blocks, int64_t t, Tensor& scores) const = 0;
  virtual absl::Status DoCausalSoftmaxBackward(int64_t blocks, int64_t t, float scale,
                                               const Tensor& probs, Tensor& grad) const = 0;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_OPS_ATTENTION_OPS_H_

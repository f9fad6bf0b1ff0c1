// SoftmaxCrossEntropy: log-softmax over the last dimension, then the negative log-likelihood of
// an int64 class id per sample (torch.nn.CrossEntropyLoss with reduction='mean' on the whole
// mini-batch). Output [b, C] (C >= 2), targets [b] with ids in [0, C). A call on one
// micro-batch returns sum_i nll_i / global_batch and grad (softmax - onehot) / global_batch.
// Stateless; thread-compatible.
#ifndef GPIPE_LAYERS_SOFTMAX_CROSS_ENTROPY_H_
#define GPIPE_LAYERS_SOFTMAX_CROSS_ENTROPY_H_

#include "layers/loss.h"

namespace gpipe {

class SoftmaxCrossEntropy final : public Loss {
 public:
  std::string_view type() const override { return "softmax_cross_entropy"; }
  DType target_dtype() const override { return DType::kI64; }
  // One class id per sample: a rank-0 per-sample shape.
  Shape target_shape(const Shape& output_shape) const override { return Shape{}; }
  absl::Status ValidateOutputShape(const Shape& output_shape) const override;
  // Fails with INVALID_ARGUMENT on mismatched shapes or dtypes, global_batch < 1, or a class id
  // out of range (naming the sample within this call's batch).
  absl::StatusOr<LossResult> Compute(Device& device, const Tensor& output, const Tensor& targets,
                                     int64_t global_batch) const override;
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_SOFTMAX_CROSS_ENTROPY_H_

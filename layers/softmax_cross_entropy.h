// SoftmaxCrossEntropy: log-softmax over the last dimension, then the negative log-likelihood of
// an int64 class id (torch.nn.CrossEntropyLoss with reduction='mean' on the whole mini-batch).
// Output [b, C] (C >= 2) with targets [b], or one prediction per position: output
// [b, P..., C] with targets [b, P...] (a language model's [b, T, vocab] and [b, T]); ids in
// [0, C). With n = the number of positions per sample (1 for [b, C]), a call on one micro-batch
// adds sum nll / (global_batch * n) into totals[kLossSum] and returns grad
// (softmax - onehot) / (global_batch * n), so the micro-batches sum to the mean over every
// position of the mini-batch; totals[kLossCorrect] counts positions whose argmax is the
// target. Stateless; thread-compatible.
#ifndef GPIPE_LAYERS_SOFTMAX_CROSS_ENTROPY_H_
#define GPIPE_LAYERS_SOFTMAX_CROSS_ENTROPY_H_

#include "layers/loss.h"

namespace gpipe {

class SoftmaxCrossEntropy final : public Loss {
 public:
  std::string_view type() const override { return "softmax_cross_entropy"; }
  DType target_dtype() const override { return DType::kI64; }
  // One class id per position: the output shape without its last (class) dimension.
  Shape target_shape(const Shape& output_shape) const override;
  absl::Status ValidateOutputShape(const Shape& output_shape) const override;
  // Fails with INVALID_ARGUMENT on mismatched shapes or dtypes, global_batch < 1, or a class id
  // out of range (naming the sample and position within this call's batch).
  absl::StatusOr<Tensor> Compute(Device& device, const Tensor& output, const Tensor& targets,
                                 int64_t global_batch, Tensor& totals) const override;
  // The class ids' range, with Compute's message.
  absl::Status CheckHostTargets(const Shape& output_shape, const Tensor& targets) const override;
  bool counts_correct() const override { return true; }
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_SOFTMAX_CROSS_ENTROPY_H_

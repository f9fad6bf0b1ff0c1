#include "layers/softmax_cross_entropy.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"

namespace gpipe {

Shape SoftmaxCrossEntropy::target_shape(const Shape& output_shape) const {
  std::vector<int64_t> dims = output_shape.dims();
  if (!dims.empty()) dims.pop_back();
  return Shape(std::move(dims));
}

absl::Status SoftmaxCrossEntropy::ValidateOutputShape(const Shape& output_shape) const {
  if (output_shape.rank() < 1 || output_shape.last() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "softmax_cross_entropy needs a per-sample output of shape [num_classes] or "
        "[positions..., num_classes] with num_classes >= 2, got ",
        output_shape.ToString(), "; end the model with a linear layer of out_features >= 2"));
  }
  return absl::OkStatus();
}

absl::StatusOr<LossResult> SoftmaxCrossEntropy::Compute(Device& device, const Tensor& output,
                                                        const Tensor& targets,
                                                        int64_t global_batch) const {
  if (output.dtype() != DType::kF32 || output.shape().rank() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "softmax_cross_entropy expects an f32 output [batch, ..., num_classes], got ",
        output.DebugString()));
  }
  RETURN_IF_ERROR(ValidateOutputShape(output.shape().WithoutBatch()));
  const int64_t batch = output.shape().dim(0);
  const int64_t classes = output.shape().last();
  const Shape expected_targets = target_shape(output.shape());
  if (targets.dtype() != DType::kI64 || targets.shape() != expected_targets) {
    return absl::InvalidArgumentError(
        absl::StrCat("softmax_cross_entropy expects i64 class ids of shape ",
                     expected_targets.ToString(), ", got ", targets.DebugString()));
  }
  if (global_batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("softmax_cross_entropy: global_batch must be >= 1, got ", global_batch));
  }
  const int64_t rows = output.shape().rows();  // batch * positions
  const int64_t positions = batch == 0 ? 1 : rows / batch;
  const int64_t* ids = targets.data<int64_t>();
  for (int64_t i = 0; i < rows; ++i) {
    if (ids[i] < 0 || ids[i] >= classes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "softmax_cross_entropy: sample ", i / positions, " of the batch",
          positions > 1 ? absl::StrCat(", position ", i % positions, ",") : std::string(),
          " has class id ", ids[i], ", outside [0, ", classes,
          "); check the targets' labels against the model's ", classes, " outputs"));
    }
  }

  ASSIGN_OR_RETURN(Tensor grad,
                   Tensor::Empty(device, output.shape(), DType::kF32, MemoryKind::kActivation));
  const float* logits = output.f32();
  float* g = grad.f32();
  const double scale = 1.0 / (static_cast<double>(global_batch) * static_cast<double>(positions));
  double loss_sum = 0.0;
  int64_t correct = 0;
  for (int64_t i = 0; i < rows; ++i) {
    const float* row = logits + i * classes;
    float* grad_row = g + i * classes;
    // Ties go to the lowest class id, as torch.argmax.
    int64_t argmax = 0;
    for (int64_t c = 1; c < classes; ++c) {
      if (row[c] > row[argmax]) argmax = c;
    }
    const double max_logit = row[argmax];
    double sum_exp = 0.0;
    for (int64_t c = 0; c < classes; ++c) sum_exp += std::exp(row[c] - max_logit);
    const double log_sum_exp = max_logit + std::log(sum_exp);
    const int64_t target = ids[i];
    loss_sum += log_sum_exp - row[target];
    for (int64_t c = 0; c < classes; ++c) {
      const double softmax = std::exp(row[c] - log_sum_exp);
      grad_row[c] = static_cast<float>((softmax - (c == target ? 1.0 : 0.0)) * scale);
    }
    if (argmax == target) ++correct;
  }
  LossResult result;
  result.loss = loss_sum * scale;
  result.grad = std::move(grad);
  result.correct = correct;
  return result;
}

}  // namespace gpipe

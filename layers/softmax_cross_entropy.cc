#include "layers/softmax_cross_entropy.h"

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"

namespace gpipe {
namespace {

// The error for class id `bad` of a micro-batch whose samples hold `positions` targets each.
absl::Status BadClassId(BadId bad, int64_t positions, int64_t classes) {
  const int64_t i = bad.index;
  return absl::InvalidArgumentError(
      absl::StrCat("softmax_cross_entropy: sample ", i / positions, " of the batch",
                   positions > 1 ? absl::StrCat(", position ", i % positions, ",") : std::string(),
                   " has class id ", bad.id, ", outside [0, ", classes,
                   "); check the targets' labels against the model's ", classes, " outputs"));
}

}  // namespace

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

absl::StatusOr<Tensor> SoftmaxCrossEntropy::Compute(Device& device, const Tensor& output,
                                                    const Tensor& targets, int64_t global_batch,
                                                    Tensor& totals) const {
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
  ASSIGN_OR_RETURN(Tensor grad,
                   Tensor::Empty(device, output.shape(), DType::kF32, MemoryKind::kActivation));
  const double scale = 1.0 / (static_cast<double>(global_batch) * static_cast<double>(positions));
  const absl::Status computed =
      device.ops().loss.SoftmaxCrossEntropy(output, targets, scale, grad, totals);
  if (!computed.ok()) {
    const std::optional<BadId> bad = BadIdOf(computed);
    if (!bad.has_value()) return WithContext(computed, "softmax_cross_entropy");
    return BadClassId(*bad, positions, classes);
  }
  return grad;
}

absl::Status SoftmaxCrossEntropy::CheckHostTargets(const Shape& output_shape,
                                                   const Tensor& targets) const {
  RETURN_IF_ERROR(ValidateOutputShape(output_shape));
  const int64_t classes = output_shape.last();
  const int64_t positions = output_shape.num_elements() / classes;
  if (!targets.defined() || targets.dtype() != DType::kI64 || !targets.host_accessible() ||
      targets.num_elements() % positions != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("softmax_cross_entropy expects host i64 class ids with ", positions,
                     " per sample, got ", targets.DebugString()));
  }
  const std::optional<BadId> bad = FirstIdOutside(
      std::span<const int64_t>(targets.data<int64_t>(), targets.num_elements()), classes);
  return bad.has_value() ? BadClassId(*bad, positions, classes) : absl::OkStatus();
}

}  // namespace gpipe

#include "layers/mse.h"

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"

namespace gpipe {

absl::Status Mse::ValidateOutputShape(const Shape& output_shape) const {
  for (int64_t d : output_shape.dims()) {
    if (d < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("mse needs a per-sample output with every dimension >= 1, got ",
                       output_shape.ToString()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> Mse::Compute(Device& device, const Tensor& output, const Tensor& targets,
                                    int64_t global_batch, Tensor& totals) const {
  if (output.dtype() != DType::kF32 || output.shape().rank() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("mse expects an f32 output [batch, ...], got ", output.DebugString()));
  }
  RETURN_IF_ERROR(ValidateOutputShape(output.shape().WithoutBatch()));
  if (targets.dtype() != DType::kF32 || targets.shape() != output.shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat("mse expects f32 targets shaped like the output ", output.DebugString(),
                     ", got ", targets.DebugString()));
  }
  if (global_batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("mse: global_batch must be >= 1, got ", global_batch));
  }
  const int64_t per_sample = output.shape().WithoutBatch().num_elements();
  const double inv_count = 1.0 / (static_cast<double>(global_batch) * per_sample);
  ASSIGN_OR_RETURN(Tensor grad,
                   Tensor::Empty(device, output.shape(), DType::kF32, MemoryKind::kActivation));
  RETURN_IF_ERROR(WithContext(
      device.ops().loss.MeanSquaredError(output, targets, inv_count, grad, totals), "mse"));
  return grad;
}

}  // namespace gpipe

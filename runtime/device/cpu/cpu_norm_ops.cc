#include "runtime/device/cpu/cpu_norm_ops.h"

namespace gpipe {

absl::Status CpuNormOps::LayerNormForward(const LayerNormArgs& args, const Tensor& x, Tensor& y, Tensor& stats) const {
  return absl::UnimplementedError("CpuNormOps::LayerNormForward: scaffolding");
}

absl::Status CpuNormOps::LayerNormBackwardInput(const LayerNormArgs& args, const Tensor& x, const Tensor& stats, const Tensor& dy, Tensor& dx) const {
  return absl::UnimplementedError("CpuNormOps::LayerNormBackwardInput: scaffolding");
}

absl::Status CpuNormOps::LayerNormBackwardParams(const LayerNormArgs& args, const Tensor& x, const Tensor& stats, const Tensor& dy, Tensor& dweight, Tensor& dbias) const {
  return absl::UnimplementedError("CpuNormOps::LayerNormBackwardParams: scaffolding");
}

absl::Status CpuNormOps::BatchNormTrainForward(const BatchNormArgs& args, const Tensor& x, Tensor& running_mean, Tensor& running_var, bool update_running, Tensor& y, Tensor& stats) const {
  return absl::UnimplementedError("CpuNormOps::BatchNormTrainForward: scaffolding");
}

absl::Status CpuNormOps::BatchNormEvalForward(const BatchNormArgs& args, const Tensor& x, const Tensor& running_mean, const Tensor& running_var, Tensor& y) const {
  return absl::UnimplementedError("CpuNormOps::BatchNormEvalForward: scaffolding");
}

absl::Status CpuNormOps::BatchNormBackward(const BatchNormArgs& args, const Tensor& x, const Tensor& stats, const Tensor& dy, Tensor& dx, Tensor& dweight, Tensor& dbias) const {
  return absl::UnimplementedError("CpuNormOps::BatchNormBackward: scaffolding");
}

}  // namespace gpipe

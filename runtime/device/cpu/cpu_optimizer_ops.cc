#include "runtime/device/cpu/cpu_optimizer_ops.h"

namespace gpipe {

absl::Status CpuOptimizerOps::Sgd(const SgdUpdate& u, Tensor& param, const Tensor& grad, Tensor& momentum_buffer) const {
  return absl::UnimplementedError("CpuOptimizerOps::Sgd: scaffolding");
}

absl::Status CpuOptimizerOps::Adam(const AdamUpdate& u, Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq) const {
  return absl::UnimplementedError("CpuOptimizerOps::Adam: scaffolding");
}

}  // namespace gpipe

#include "runtime/backend/sim/sim_loss.h"

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"

namespace gpipe {

absl::StatusOr<Tensor> SimLoss::Compute(Device& device, const Tensor& output, const Tensor& targets,
                                        int64_t global_batch, Tensor& /*totals*/) const {
  if (!output.defined() || !targets.defined() || output.shape().rank() < 1 ||
      targets.shape().rank() < 1 || output.shape().dim(0) != targets.shape().dim(0)) {
    return absl::InvalidArgumentError(absl::StrCat("sim: loss of output ", output.DebugString(),
                                                   " against targets ", targets.DebugString()));
  }
  if (global_batch < 1) return absl::InvalidArgumentError("sim: loss needs global_batch >= 1");
  ASSIGN_OR_RETURN(Tensor grad,
                   Tensor::Empty(device, output.shape(), DType::kF32, MemoryKind::kActivation));
  RETURN_IF_ERROR(device_.Occupy(time_));
  return grad;
}

}  // namespace gpipe

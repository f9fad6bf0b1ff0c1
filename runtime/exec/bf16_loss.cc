#include "runtime/exec/bf16_loss.h"

#include "layers/bf16_tensors.h"
#include "runtime/core/status_macros.h"

namespace gpipe {

absl::StatusOr<Tensor> Bf16Loss::Compute(Device& device, const Tensor& output,
                                         const Tensor& targets, int64_t global_batch,
                                         Tensor& totals) const {
  ASSIGN_OR_RETURN(const Tensor wide, WidenedFromBf16(device, output, MemoryKind::kWorkspace));
  return inner_->Compute(device, wide, targets, global_batch, totals);
}

}  // namespace gpipe

#include "runtime/exec/tied_gradients.h"

#include <memory>

#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"

namespace gpipe {

absl::Status SumTiedGradients(const TiedGradientSum& tie, std::span<const ChunkRefs> chunks,
                              Device& device, absl::Time deadline) {
  std::vector<Tensor> members;
  for (const ParameterSlot& slot : tie.members) {
    members.push_back(chunks[slot.chunk].parameters->grads()[slot.index]);
  }
  if (members.empty()) return absl::OkStatus();
  const TensorOps& ops = device.ops().tensor;
  Tensor sum = members.front();
  for (size_t i = 1; i < members.size(); ++i) RETURN_IF_ERROR(ops.Add(sum, members[i], sum));
  if (tie.group != nullptr) {
    std::vector<Tensor> reduced = {sum};
    absl::StatusOr<std::unique_ptr<TransferHandle>> handle =
        tie.group->Start(0, std::span<Tensor>(reduced));
    if (!handle.ok()) return WithContext(handle.status(), tie.what);
    RETURN_IF_ERROR(WithContext((*handle)->Wait(deadline), tie.what));
  }
  for (size_t i = 1; i < members.size(); ++i) RETURN_IF_ERROR(ops.Copy(sum, members[i]));
  return absl::OkStatus();
}

}  // namespace gpipe

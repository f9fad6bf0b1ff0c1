#include "runtime/exec/micro_batch_state.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace gpipe {

MicroBatchStates::MicroBatchStates(int chunks, int micro_batches, bool forward_only)
    : chunks_(chunks),
      micro_batches_(micro_batches),
      forward_only_(forward_only),
      finished_(static_cast<size_t>(std::max(chunks, 0)) *
                    static_cast<size_t>(std::max(micro_batches, 0)),
                false) {}

absl::Status MicroBatchStates::Check(int chunk, int m) const {
  if (m < 0 || m >= micro_batches_) {
    return absl::InvalidArgumentError(
        absl::StrCat("micro-batch ", m, " is outside [0, ", micro_batches_, ")"));
  }
  if (chunk < 0 || chunk >= chunks_) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk ", chunk, " is outside [0, ", chunks_, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<MicroBatch*> MicroBatchStates::Get(int chunk, int m) {
  if (absl::Status checked = Check(chunk, m); !checked.ok()) return checked;
  const int64_t slot = Slot(chunk, m);
  if (finished_[slot]) {
    return absl::FailedPreconditionError(
        "the micro-batch already finished on this stage: the instruction repeats work");
  }
  return &state_.try_emplace(slot).first->second;
}

void MicroBatchStates::ReleaseIfDone(int chunk, int m) {
  const int64_t slot = Slot(chunk, m);
  auto it = state_.find(slot);
  if (it == state_.end()) return;
  const MicroBatch& mb = it->second;
  const bool backward_done =
      forward_only_ ? mb.forwarded : mb.input_grad_done && !mb.weight_grad_pending;
  if (backward_done && !mb.output.defined() && !mb.input_grad.defined() &&
      mb.skip_outputs.empty() && mb.skip_grads_out.empty()) {
    state_.erase(it);
    finished_[slot] = true;
  }
}

absl::Status MicroBatchStates::CheckAllReleased() const {
  if (state_.empty()) return absl::OkStatus();
  int64_t slot = state_.begin()->first;
  for (const auto& [s, unused] : state_) slot = std::min(slot, s);  // deterministic message
  return absl::InternalError(absl::StrCat("micro-batch ", slot % micro_batches_, " (chunk ",
                                          slot / micro_batches_,
                                          ") still holds tensors at the end of the step"));
}

}  // namespace gpipe

#include "runtime/exec/micro_batch_plan.h"

#include <optional>
#include <variant>

namespace gpipe {
namespace {

bool IsCompute(const schedule::Instruction& instruction) {
  return std::holds_alternative<schedule::Forward>(instruction) ||
         std::holds_alternative<schedule::Backward>(instruction) ||
         std::holds_alternative<schedule::BackwardInput>(instruction) ||
         std::holds_alternative<schedule::BackwardWeight>(instruction);
}

bool StartsBackward(const schedule::Instruction& instruction) {
  return std::holds_alternative<schedule::Backward>(instruction) ||
         std::holds_alternative<schedule::BackwardInput>(instruction);
}

}  // namespace

MicroBatchPlan::MicroBatchPlan(const schedule::StageProgram& program, int chunks, int micro_batches,
                               pb::Remat remat, pb::Offload offload)
    : micro_batches_(micro_batches) {
  const size_t slots = static_cast<size_t>(chunks > 0 ? chunks : 0) *
                       static_cast<size_t>(micro_batches > 0 ? micro_batches : 0);
  for (const schedule::Instruction& instruction : program.instructions) {
    if (std::holds_alternative<schedule::ReportEval>(instruction)) forward_only_ = true;
  }
  keep_.assign(slots, !forward_only_ && remat == pb::NEVER);
  offload_.assign(slots, false);
  restores_.resize(program.instructions.size());
  if (forward_only_ || remat == pb::NEVER) return;

  // The slot whose Forward was the last compute instruction seen; `slots` when none.
  size_t just_forwarded = slots;
  // Per slot: the ordinal of its Forward among the compute instructions; the index of the last
  // compute instruction seen and the ordinal of the current one.
  std::vector<std::optional<int>> forwarded_at(slots);
  std::optional<size_t> last_compute;
  int ordinal = 0;
  for (size_t i = 0; i < program.instructions.size(); ++i) {
    const schedule::Instruction& instruction = program.instructions[i];
    if (!IsCompute(instruction)) continue;
    const int m = *schedule::MicroBatchOf(instruction);
    const int c = schedule::ChunkOf(instruction);
    const bool in_range = m >= 0 && m < micro_batches && c >= 0 && c < chunks;
    const size_t slot = in_range ? SlotIndex(c, m) : slots;
    if (in_range && StartsBackward(instruction)) {
      if (remat == pb::EXCEPT_LAST && just_forwarded == slot) keep_[slot] = true;
      // Two or more compute instructions between the Forward and this backward: the input is
      // away during all but the last (with one, it would come back as soon as it had left).
      if (offload == pb::STAGE_INPUTS && !keep_[slot] && forwarded_at[slot].has_value() &&
          ordinal - *forwarded_at[slot] > 2) {
        offload_[slot] = true;
        restores_[*last_compute].push_back({c, m});
      }
    }
    just_forwarded = slots;
    if (in_range && std::holds_alternative<schedule::Forward>(instruction)) {
      just_forwarded = slot;
      forwarded_at[slot] = ordinal;
    }
    last_compute = i;
    ++ordinal;
  }
}

bool MicroBatchPlan::KeepsActivations(int chunk, int micro_batch) const {
  const size_t slot = SlotIndex(chunk, micro_batch);
  return slot < keep_.size() && keep_[slot];
}

bool MicroBatchPlan::Offloads(int chunk, int micro_batch) const {
  const size_t slot = SlotIndex(chunk, micro_batch);
  return slot < offload_.size() && offload_[slot];
}

std::span<const MicroBatchPlan::Slot> MicroBatchPlan::RestoresBefore(size_t index) const {
  if (index >= restores_.size()) return {};
  return restores_[index];
}

}  // namespace gpipe

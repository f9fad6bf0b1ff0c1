#include "runtime/exec/micro_batch_plan.h"

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
                               pb::Remat remat)
    : micro_batches_(micro_batches) {
  const size_t slots = static_cast<size_t>(chunks > 0 ? chunks : 0) *
                       static_cast<size_t>(micro_batches > 0 ? micro_batches : 0);
  for (const schedule::Instruction& instruction : program.instructions) {
    if (std::holds_alternative<schedule::ReportEval>(instruction)) forward_only_ = true;
  }
  keep_.assign(slots, !forward_only_ && remat == pb::NEVER);
  if (forward_only_ || remat != pb::EXCEPT_LAST) return;

  // The slot whose Forward was the last compute instruction seen; `slots` when none.
  size_t just_forwarded = slots;
  for (const schedule::Instruction& instruction : program.instructions) {
    if (!IsCompute(instruction)) continue;
    const int m = *schedule::MicroBatchOf(instruction);
    const int c = schedule::ChunkOf(instruction);
    const bool in_range = m >= 0 && m < micro_batches && c >= 0 && c < chunks;
    const size_t slot = in_range ? static_cast<size_t>(c) * micro_batches + m : slots;
    if (in_range && StartsBackward(instruction) && just_forwarded == slot) keep_[slot] = true;
    just_forwarded = slots;
    if (in_range && std::holds_alternative<schedule::Forward>(instruction)) just_forwarded = slot;
  }
}

bool MicroBatchPlan::KeepsActivations(int chunk, int micro_batch) const {
  const size_t slot = static_cast<size_t>(chunk) * micro_batches_ + micro_batch;
  return slot < keep_.size() && keep_[slot];
}

}  // namespace gpipe

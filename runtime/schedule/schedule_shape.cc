#include "runtime/schedule/schedule_shape.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/core/status_macros.h"

namespace gpipe::schedule {
namespace {

std::string NameOf(pb::Schedule kind) { return pb::Schedule_Name(kind); }

absl::Status CheckCounts(int stages, int micro_batches, int virtual_stages) {
  if (stages < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline.stages is ", stages, "; it must be at least 1 (one process per stage)"));
  }
  if (micro_batches < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline.micro_batches is ", micro_batches, "; it must be at least 1"));
  }
  if (virtual_stages < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline.virtual_stages is ", virtual_stages,
                     "; it must be at least 1 (1 for every schedule except INTERLEAVED_1F1B)"));
  }
  return absl::OkStatus();
}

// Megatron-LM's interleaved order needs two stages and two chunks; any micro-batch count works
// (a last group smaller than `stages`).
absl::Status CheckInterleaved(int stages, int virtual_stages) {
  if (stages < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "INTERLEAVED_1F1B needs pipeline.stages >= 2 (got ", stages,
        "): with one stage there is no bubble to shrink; use pipeline.schedule ONE_F_ONE_B"));
  }
  if (virtual_stages < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "INTERLEAVED_1F1B needs pipeline.virtual_stages >= 2 (got ", virtual_stages,
        "): set it to the number of chunks per stage (2 or more), or use pipeline.schedule "
        "ONE_F_ONE_B"));
  }
  return absl::OkStatus();
}

absl::Status CheckSize(int stages, int micro_batches, int virtual_stages) {
  const long long pairs = static_cast<long long>(stages) * virtual_stages * micro_batches;
  if (pairs <= kMaxStageMicroBatches) return absl::OkStatus();
  const std::string product =
      virtual_stages == 1
          ? absl::StrCat("pipeline.stages * pipeline.micro_batches is ", stages, " * ",
                         micro_batches)
          : absl::StrCat("pipeline.stages * pipeline.virtual_stages * pipeline.micro_batches is ",
                         stages, " * ", virtual_stages, " * ", micro_batches);
  return absl::InvalidArgumentError(absl::StrCat(product, " = ", pairs, "; at most ",
                                                 kMaxStageMicroBatches,
                                                 " is supported: use fewer micro-batches"));
}

}  // namespace

std::vector<pb::Schedule> AllSchedules() {
  return {pb::GPIPE,          pb::ONE_F_ONE_B,   pb::INTERLEAVED_1F1B, pb::ZERO_BUBBLE_H1,
          pb::ZERO_BUBBLE_H2, pb::ZERO_BUBBLE_V, pb::DUALPIPE_V,       pb::EVAL};
}

std::string ScheduleNames() {
  return absl::StrJoin(AllSchedules(), ", ", [](std::string* out, pb::Schedule kind) {
    absl::StrAppend(out, NameOf(kind));
  });
}

bool IsForwardOnly(pb::Schedule kind) { return kind == pb::EVAL; }

std::string DegenerateNote(pb::Schedule kind, int stages, int micro_batches) {
  if (kind != pb::DUALPIPE_V || micro_batches >= 2 * stages) return "";
  return absl::StrCat("DUALPIPE_V's phases need pipeline.micro_batches >= 2 * stages = ",
                      2 * stages, "; with ", micro_batches, " it runs ZERO_BUBBLE_V's order (use ",
                      2 * stages, " or more micro-batches for DualPipeV's own)");
}

absl::Status CheckScheduleShape(pb::Schedule kind, int stages, int micro_batches,
                                int virtual_stages) {
  RETURN_IF_ERROR(CheckCounts(stages, micro_batches, virtual_stages));
  // -Wswitch flags a proto enum value without a case here: a new kind decides its rules.
  switch (kind) {
    case pb::INTERLEAVED_1F1B:
      RETURN_IF_ERROR(CheckInterleaved(stages, virtual_stages));
      return CheckSize(stages, micro_batches, virtual_stages);
    case pb::CUSTOM:  // the action lists decide the chunks (custom_program.h)
    case pb::EVAL:  // any chunk count: it evaluates whatever parts the training program runs
      return CheckSize(stages, micro_batches, virtual_stages);
    case pb::ZERO_BUBBLE_V:
    case pb::DUALPIPE_V:
      if (virtual_stages != 2) {
        return absl::InvalidArgumentError(absl::StrCat(
            "pipeline.virtual_stages is ", virtual_stages, " but pipeline.schedule ", NameOf(kind),
            " runs two chunks per stage in a V: remove pipeline.virtual_stages (it is then 2)"));
      }
      return CheckSize(stages, micro_batches, virtual_stages);
    case pb::GPIPE:
    case pb::ONE_F_ONE_B:
    case pb::ZERO_BUBBLE_H1:
    case pb::ZERO_BUBBLE_H2:
      if (virtual_stages != 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "pipeline.virtual_stages is ", virtual_stages, " but pipeline.schedule ", NameOf(kind),
            " runs one chunk per stage: set pipeline.virtual_stages to 1, or use "
            "pipeline.schedule INTERLEAVED_1F1B"));
      }
      return CheckSize(stages, micro_batches, virtual_stages);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("pipeline.schedule ", static_cast<int>(kind),
                   " is not supported; supported schedules: ", ScheduleNames()));
}

}  // namespace gpipe::schedule

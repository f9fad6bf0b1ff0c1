#include "runtime/trace/timeline_from_simulation.h"

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gpipe::trace {
namespace {

std::optional<BoxKind> KindOf(const schedule::Instruction& instruction) {
  if (std::holds_alternative<schedule::Forward>(instruction)) return BoxKind::kForward;
  if (std::holds_alternative<schedule::Backward>(instruction)) return BoxKind::kBackward;
  if (std::holds_alternative<schedule::BackwardInput>(instruction)) {
    return BoxKind::kBackwardInput;
  }
  if (std::holds_alternative<schedule::BackwardWeight>(instruction)) {
    return BoxKind::kBackwardWeight;
  }
  if (std::holds_alternative<schedule::LoadMicroBatch>(instruction)) return BoxKind::kOther;
  return std::nullopt;
}

// The trace's names for the same work: "F3", "B3", "W3" ("F3.1" for chunk 1), "load 3".
std::string BoxName(BoxKind kind, int micro_batch, int chunk) {
  if (kind == BoxKind::kOther) return absl::StrCat("load ", micro_batch);
  const char* letter = kind == BoxKind::kForward          ? "F"
                       : kind == BoxKind::kBackwardWeight ? "W"
                                                          : "B";
  return chunk > 0 ? absl::StrCat(letter, micro_batch, ".", chunk)
                   : absl::StrCat(letter, micro_batch);
}

// Boxes and rows from the simulator's per-instruction timeline.
absl::StatusOr<Timeline> TimelineOfEntries(const schedule::Program& program, double makespan,
                                           const std::vector<schedule::TimelineEntry>& entries) {
  Timeline timeline;
  timeline.simulated = true;
  timeline.schedule = pb::Schedule_Name(program.kind);
  timeline.stages = program.stages;
  timeline.micro_batches = program.micro_batches;
  timeline.chunks = program.chunks;
  timeline.unit = TimeUnit::kSimulated;
  timeline.window_begin = 0;
  timeline.window_end = makespan;
  for (int s = 0; s < program.stages; ++s) {
    TimelineRow row;
    row.label = absl::StrCat("stage ", s);
    row.stage = s;
    timeline.rows.push_back(row);
  }
  for (const schedule::TimelineEntry& entry : entries) {
    if (entry.stage < 0 || entry.stage >= program.stages || entry.index < 0 ||
        entry.index >= static_cast<int>(program.stage_programs[entry.stage].instructions.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("the simulation does not belong to this program: it has an entry for "
                       "stage ",
                       entry.stage, ", instruction #", entry.index));
    }
    const schedule::Instruction& instruction =
        program.stage_programs[entry.stage].instructions[entry.index];
    const std::optional<BoxKind> kind = KindOf(instruction);
    if (!kind || (*kind == BoxKind::kOther && entry.end <= entry.start)) continue;
    TimelineBox box;
    box.row = entry.stage;
    box.begin = entry.start;
    box.end = entry.end;
    box.kind = *kind;
    box.micro_batch = schedule::MicroBatchOf(instruction).value_or(-1);
    box.chunk = schedule::ChunkOf(instruction);
    box.name = BoxName(box.kind, box.micro_batch, box.chunk);
    timeline.boxes.push_back(box);
  }
  MeasureRows(timeline);
  return timeline;
}

}  // namespace

absl::StatusOr<Timeline> TimelineFromSimulation(const schedule::Program& program,
                                                const schedule::Simulation& simulation) {
  absl::StatusOr<Timeline> timeline =
      TimelineOfEntries(program, simulation.makespan, simulation.timeline);
  if (timeline.ok() && simulation.makespan > 0 && !simulation.busy.empty()) {
    double bubble = 0;
    for (double busy : simulation.busy) bubble += 1.0 - busy / simulation.makespan;
    timeline->predicted_bubble = bubble / simulation.busy.size();
  }
  return timeline;
}

absl::StatusOr<Timeline> TimelineFromSimulation(const schedule::Program& program,
                                                const schedule::VerifyResult& verified) {
  absl::StatusOr<Timeline> timeline =
      TimelineOfEntries(program, verified.makespan, verified.timeline);
  if (timeline.ok()) timeline->predicted_bubble = verified.bubble_fraction;
  return timeline;
}

}  // namespace gpipe::trace

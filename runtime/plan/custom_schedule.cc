#include "runtime/plan/custom_schedule.h"

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/file_io.h"
#include "runtime/plan/plan_defaults.h"
#include "runtime/schedule/action_list.h"
#include "runtime/schedule/custom_program.h"

namespace gpipe {
namespace {

absl::StatusOr<schedule::ActionTable> ReadActionTable(const std::string& directory,
                                                      const pb::Pipeline& pipeline) {
  if (!pipeline.has_schedule_csv()) return schedule::ActionTableFromProto(pipeline.custom());
  const std::string& given = pipeline.schedule_csv();
  const std::string path = ResolvePlanPath(directory, given);
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot read '", given, "' (", path, ", relative to the plan's directory): ",
        text.status().message(), "; give the path of a schedule CSV, one row per rank"));
  }
  return schedule::ParseScheduleCsv(*text, given);
}

// A message that starts with a pipeline.custom row ("pipeline.custom.ranks[1]: action 2 ...") is
// reported at that row's location; others (CSV rows name the file and line) at `field`.
void AddScheduleError(const std::string& field, const absl::Status& status, PlanErrors& errors) {
  const std::string message(status.message());
  const size_t colon = message.find("]: ");
  if (absl::StartsWith(message, "pipeline.custom.ranks[") && colon != std::string::npos) {
    errors.Add(message.substr(0, colon + 1), message.substr(colon + 3));
    return;
  }
  errors.Add(field, message);
}

}  // namespace

void ResolveCustomSchedule(const std::string& directory, pb::Plan* plan, PlanErrors& errors) {
  pb::Pipeline& pipeline = *plan->mutable_pipeline();
  const bool has_custom = pipeline.has_custom();
  const bool has_csv = pipeline.has_schedule_csv();
  if (pipeline.schedule() != pb::CUSTOM) {
    const std::string schedule = pb::Schedule_Name(pipeline.schedule());
    for (const auto& [set, field] :
         {std::pair{has_custom, "pipeline.custom"}, std::pair{has_csv, "pipeline.schedule_csv"}}) {
      if (!set) continue;
      errors.Add(field, absl::StrCat("is set but pipeline.schedule is ", schedule,
                                     "; set schedule: CUSTOM to run it, or remove ", field));
    }
    return;
  }
  if (has_custom == has_csv) {
    errors.Add("pipeline.schedule",
               has_custom
                   ? "CUSTOM takes its actions from one of pipeline.custom and "
                     "pipeline.schedule_csv, but both are set; remove one"
                   : "CUSTOM needs its actions: set pipeline.custom { ranks { actions: \"0F0 "
                     "0B0\" } ... } (one ranks entry per stage) or pipeline.schedule_csv: "
                     "\"schedule.csv\"");
    return;
  }
  const int stages = pipeline.stages();
  const int micro_batches = pipeline.micro_batches();
  if (stages < 1 || micro_batches < 1) return;
  const std::string field = has_csv ? "pipeline.schedule_csv" : "pipeline.custom";
  absl::StatusOr<schedule::ActionTable> table = ReadActionTable(directory, pipeline);
  if (!table.ok()) {
    AddScheduleError(field, table.status(), errors);
    return;
  }
  const int rows = static_cast<int>(table->size());
  if (rows != stages) {
    errors.Add(field,
               absl::StrCat("has ", rows, " row(s), one per rank, but pipeline.stages is ", stages,
                            "; write one row per stage or set pipeline.stages: ", rows));
    return;
  }
  absl::StatusOr<schedule::Program> program = schedule::CompileCustomProgram(*table, micro_batches);
  if (!program.ok()) {
    AddScheduleError(field, program.status(), errors);
    return;
  }
  if (pipeline.has_virtual_stages() && pipeline.virtual_stages() != program->chunks) {
    errors.Add("pipeline.virtual_stages",
               absl::StrCat("is ", pipeline.virtual_stages(), " but the CUSTOM schedule runs ",
                            program->chunks * stages, " virtual stages on ", stages, " ranks, so ",
                            program->chunks,
                            " chunk(s) per rank; remove pipeline.virtual_stages (the schedule "
                            "sets it)"));
    return;
  }
  if (pipeline.has_placement() && pipeline.placement() != program->placement) {
    errors.Add("pipeline.placement",
               absl::StrCat("is ", pb::Placement_Name(pipeline.placement()),
                            " but the CUSTOM schedule's stage ids place its virtual stages ",
                            pb::Placement_Name(program->placement),
                            "; remove pipeline.placement (the schedule sets it)"));
    return;
  }
  pipeline.set_virtual_stages(program->chunks);
  pipeline.set_placement(program->placement);
  *pipeline.mutable_custom() = schedule::ActionTableToProto(*table);
  pipeline.clear_schedule_csv();
}

void ResolvePlacement(pb::Plan* plan, PlanErrors& errors) {
  pb::Pipeline& pipeline = *plan->mutable_pipeline();
  const pb::Schedule kind = pipeline.schedule();
  if (kind == pb::CUSTOM) return;
  const bool v_shape = kind == pb::ZERO_BUBBLE_V || kind == pb::DUALPIPE_V;
  const pb::Placement implied = v_shape ? pb::V_SHAPE : pb::LOOPED;
  if (pipeline.has_placement() && pipeline.placement() != implied) {
    errors.Add("pipeline.placement",
               absl::StrCat("is ", pb::Placement_Name(pipeline.placement()), " but ",
                            pb::Schedule_Name(kind), " runs ", pb::Placement_Name(implied),
                            "; V_SHAPE comes with ZERO_BUBBLE_V, DUALPIPE_V or a CUSTOM schedule "
                            "that zigzags: remove pipeline.placement (the schedule sets it)"));
    return;
  }
  pipeline.set_placement(implied);
  if (v_shape && !pipeline.has_virtual_stages()) pipeline.set_virtual_stages(2);
}

}  // namespace gpipe

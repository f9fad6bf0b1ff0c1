#include "runtime/coord/setup_builder.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/coord/checkpoint_claim.h"
#include "runtime/coord/init_from.h"
#include "runtime/coord/resume_source.h"
#include "runtime/core/file_ownership.h"
#include "runtime/core/output_path.h"
#include "runtime/core/status_macros.h"
#include "runtime/data/data_files.h"
#include "runtime/estimate/flop_costs.h"
#include "runtime/estimate/resolve_plan.h"
#include "runtime/estimate/schedule_prediction.h"
#include "runtime/plan/plan_loader.h"
#include "runtime/plan/plan_program.h"
#include "runtime/schedule/build_program.h"
#include "runtime/schedule/rank_layout.h"

namespace gpipe {

namespace {

// Tied parameters, for the ranks of one replica: which of them own a member. The replicas'
// copies of a member are summed by the data-parallel gradient all-reduce first, so the tie sum
// stays inside the replica (summing over every replica's ranks would count each gradient D
// times).
std::vector<pb::TieGroup> TieGroupsOfReplica(const AnalyzedPlan& analyzed,
                                             const schedule::RankLayout& layout, int replica) {
  std::vector<pb::TieGroup> ties;
  for (const TieInfo& tie : analyzed.ties) {
    pb::TieGroup& group = ties.emplace_back();
    std::set<int> ranks;
    for (const TieInfo::Member& member : tie.members) {
      group.add_parameters(member.name);
      for (const StageInfo& part : analyzed.stages) {
        if (member.layer >= part.first_layer && member.layer < part.end_layer) {
          ranks.insert(layout.RankOf(replica, part.stage));
        }
      }
    }
    const TieInfo::Member& first = tie.members.front();
    const ParamSpec& spec = analyzed.layers[first.layer].parameter_specs[first.parameter];
    group.set_init_layer(first.layer);
    group.set_init_parameter(first.parameter);
    group.set_init_kind(static_cast<int>(spec.init));
    group.set_init_bound(spec.bound);
    for (int r : ranks) group.add_ranks(r);
  }
  return ties;
}

// A plan naming a custom data source this program does not register is refused (before the
// balance and the analysis).
absl::Status CheckDataSource(const LoadedPlan& loaded, const DataSourceRegistry* data_sources) {
  if (!loaded.plan.data().has_custom()) return absl::OkStatus();
  const std::string& name = loaded.plan.data().custom().name();
  if (data_sources != nullptr && data_sources->Contains(name)) return absl::OkStatus();
  const std::vector<std::string> known =
      data_sources != nullptr ? data_sources->names() : std::vector<std::string>();
  return absl::InvalidArgumentError(
      absl::StrCat(loaded.LocationOf("data.custom.name"), ": data.custom.name '", name,
                   "' is not a data source of this program (",
                   known.empty() ? std::string("it registers none")
                                 : absl::StrCat("it registers ", absl::StrJoin(known, ", ")),
                   "); custom sources exist only in the program that registers them"));
}

// Every output is checked before the first step, so that a run never trains to lose its result:
// each is a replaceable file in a writable directory (output_path.h), and none is a file the run
// reads, another output, or inside a checkpoint directory (file_ownership.h). Returns the run's
// files, against which a later export is checked too.
absl::StatusOr<RunFiles> CheckOutputs(const WorkerOptions& options, const pb::Plan& plan) {
  RunFiles files;
  const auto output = [&files](const char* flag, const std::string& flag_value, const char* field,
                               const std::string& field_value) {
    if (!flag_value.empty()) {
      files.outputs.push_back(FileRole{.role = flag, .path = flag_value});
    } else if (!field_value.empty()) {
      files.outputs.push_back(FileRole{.role = field, .path = field_value});
    }
  };
  output("--export", options.export_path, "", "");
  output("--metrics-out", options.metrics_out, "runtime.metrics_out", plan.runtime().metrics_out());
  output("--trace", options.trace, "runtime.trace", plan.runtime().trace());
  for (const FileRole& out : files.outputs) RETURN_IF_ERROR(CheckOutputFile(out.role, out.path));
  if (!plan.checkpoint().dir().empty()) {
    RETURN_IF_ERROR(CheckOutputDirectory("checkpoint.dir", plan.checkpoint().dir()));
    files.kept_dirs.push_back(FileRole{.role = "checkpoint.dir", .path = plan.checkpoint().dir()});
  }
  if (!options.resume.empty() && options.resume != "latest") {
    files.kept_dirs.push_back(FileRole{.role = "the --resume checkpoint", .path = options.resume});
  }
  if (!options.plan_text.has_value()) {
    files.inputs.push_back(FileRole{.role = "the plan", .path = options.plan_path});
  }
  if (!options.init_from.empty()) {
    // A sharded checkpoint is a directory of files: nothing may be written inside it.
    std::error_code error;
    if (std::filesystem::is_directory(options.init_from, error)) {
      files.kept_dirs.push_back(
          FileRole{.role = "the --init-from checkpoint", .path = options.init_from});
    } else if (options.init_from.ends_with(".index.json")) {
      files.kept_dirs.push_back(
          FileRole{.role = "the --init-from checkpoint",
                   .path = std::filesystem::path(options.init_from).parent_path().string()});
    } else {
      files.inputs.push_back(FileRole{.role = "--init-from", .path = options.init_from});
    }
  }
  for (FileRole& data : DataFiles(plan)) files.inputs.push_back(std::move(data));
  RETURN_IF_ERROR(CheckRunFiles(files));
  return files;
}

}  // namespace

absl::StatusOr<ResolvedJob> ResolveJob(const WorkerOptions& options, int world_size,
                                       const LayerRegistry& layers,
                                       const DataSourceRegistry* data_sources) {
  const PlanOrigin origin = options.plan_text.has_value()
                                ? PlanOrigin(PlanText{.text = *options.plan_text,
                                                      .name = options.plan_source_name,
                                                      .directory = options.plan_directory})
                                : PlanOrigin(PlanFile{.path = options.plan_path});
  ASSIGN_OR_RETURN(ResolvedPlan resolved,
                   ResolvePlan(origin, options.overrides, layers,
                               ResolveOptions{.check_loaded = [data_sources](const LoadedPlan& p) {
                                 return CheckDataSource(p, data_sources);
                               }}));
  const LoadedPlan& loaded = resolved.loaded;
  const LayerRegistry& registry = resolved.registry;
  ResolvedJob job;
  job.analyzed = std::move(resolved.analyzed);
  RETURN_IF_ERROR(CheckWorldSize(job.analyzed, loaded, world_size));
  if (struct stat info;
      !options.init_from.empty() && ::stat(options.init_from.c_str(), &info) != 0) {
    return absl::NotFoundError(
        absl::StrCat("--init-from: ", options.init_from, ": ",
                     errno == ENOENT  ? "no such file"
                     : errno == ELOOP ? "too many levels of symbolic links (a symlink loop)"
                                      : std::strerror(errno)));
  }
  if (!options.init_from.empty() && !options.resume.empty()) {
    return absl::InvalidArgumentError(
        "--init-from and --resume exclude each other (a checkpoint holds the parameters)");
  }
  if (!options.init_from.empty()) {
    // Headers only: the values are read by the stages that own them.
    ASSIGN_OR_RETURN(const HfCheckpoint initial, HfCheckpoint::Open(options.init_from));
    RETURN_IF_ERROR(CheckInitFrom(initial, job.analyzed));
  }
  pb::Plan& plan = job.analyzed.plan;
  if (!plan.checkpoint().dir().empty()) {
    // Every rank writes into it: the path must not depend on where a rank runs.
    plan.mutable_checkpoint()->set_dir(
        std::filesystem::absolute(plan.checkpoint().dir()).lexically_normal().string());
  }
  if (options.start_over && !options.resume.empty()) {
    return absl::InvalidArgumentError(
        "--start-over and --resume exclude each other (one trains from the first step, the "
        "other continues a checkpoint)");
  }
  if (options.start_over && plan.checkpoint().dir().empty()) {
    return absl::InvalidArgumentError(
        "--start-over needs a checkpoint.dir (it says what to do with the checkpoints there)");
  }
  ASSIGN_OR_RETURN(job.files, CheckOutputs(options, plan));
  if (!plan.checkpoint().dir().empty()) {
    ASSIGN_OR_RETURN(job.checkpoint_lock, LockCheckpointDirectory(plan.checkpoint().dir()));
  }
  std::string data_fingerprint;
  if (!plan.checkpoint().dir().empty() || !options.resume.empty()) {
    ASSIGN_OR_RETURN(data_fingerprint, DataFingerprint(plan));
  }
  std::optional<pb::ResumeFrom> resume;
  if (!options.resume.empty()) {
    ASSIGN_OR_RETURN(resume, ResolveResume(options.resume, plan, data_fingerprint));
  }
  if (!plan.checkpoint().dir().empty()) {
    RETURN_IF_ERROR(CheckNoTakeover(plan.checkpoint().dir(), resume, options.start_over));
  }
  const pb::Pipeline& pipeline = job.analyzed.plan.pipeline();
  ASSIGN_OR_RETURN(schedule::Program program, TrainingProgramOf(job.analyzed));
  auto prediction = schedule::VerifyProgram(program, CostsFromFlops(job.analyzed));
  if (!prediction.ok() && pipeline.schedule() == pb::CUSTOM && !program.skips.empty()) {
    // The schedule passed plan check alone; with this model's skip connections added it does
    // not (e.g. a rank's two chunks taking micro-batches in different orders).
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline.custom: the schedule with this model's skip connections across stages fails "
        "verification: ",
        prediction.status().message()));
  }
  if (!prediction.ok()) {
    return absl::InternalError(
        absl::StrCat("the built schedule failed verification (a gpipe bug; please report it): ",
                     prediction.status().message()));
  }
  job.prediction = *std::move(prediction);
  std::optional<schedule::Program> eval_program;
  if (job.analyzed.plan.training().eval_every() > 0) {
    ASSIGN_OR_RETURN(eval_program, EvalProgramOf(job.analyzed));
    if (absl::Status verified =
            schedule::VerifyProgram(*eval_program, CostsFromFlops(job.analyzed)).status();
        !verified.ok()) {
      return absl::InternalError(absl::StrCat(
          "the evaluation schedule failed verification (a gpipe bug; please report it): ",
          verified.message()));
    }
  }

  ASSIGN_OR_RETURN(const std::vector<pb::StageMemory> memory,
                   PredictStageMemory(job.analyzed, registry));
  ASSIGN_OR_RETURN(const schedule::RankLayout layout,
                   schedule::RankLayout::Create(pipeline.data_parallel(), pipeline.stages()));
  for (int rank = 0; rank < world_size; ++rank) {
    pb::Setup setup;
    for (pb::TieGroup& group : TieGroupsOfReplica(job.analyzed, layout, layout.ReplicaOf(rank))) {
      *setup.add_ties() = std::move(group);
    }
    *setup.mutable_plan() = job.analyzed.plan;
    for (pb::StageSpec& spec : ToStageSpecs(job.analyzed)) *setup.add_stages() = std::move(spec);
    const int stage = layout.StageOf(rank);
    setup.set_rank(rank);
    setup.set_stage(stage);
    *setup.mutable_predicted_memory() = memory[stage];
    *setup.mutable_layout() = layout.ToProto();
    *setup.mutable_program() = schedule::ToProto(program.stage_programs[stage]);
    if (eval_program.has_value()) {
      *setup.mutable_eval_program() = schedule::ToProto(eval_program->stage_programs[stage]);
    }
    if (!options.init_from.empty()) setup.set_init_from(options.init_from);
    if (resume.has_value()) *setup.mutable_resume() = *resume;
    setup.set_export_parameters(!options.export_path.empty());
    if (!data_fingerprint.empty()) setup.set_data_fingerprint(data_fingerprint);
    if (options.start_over) setup.set_start_over(true);
    for (int64_t d : job.analyzed.target_shape.dims()) setup.add_target_shape(d);
    setup.set_class_targets(job.analyzed.target_dtype == DType::kI64);
    setup.set_num_classes(job.analyzed.num_classes);
    job.setups.push_back(std::move(setup));
  }
  return job;
}

}  // namespace gpipe

#include "runtime/plan/plan_analysis.h"

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/check.h"
#include "runtime/core/status_macros.h"
#include "runtime/plan/custom_schedule.h"
#include "runtime/plan/partition.h"
#include "runtime/plan/plan_defaults.h"
#include "runtime/plan/plan_errors.h"
#include "runtime/plan/settings_checks.h"
#include "runtime/plan/shape_inference.h"
#include "runtime/schedule/topology.h"

namespace gpipe {
namespace {

// First layer index of each stage: the explicit boundaries (already validated) or the balancer.
absl::StatusOr<std::vector<int>> StageStarts(const pb::Plan& plan,
                                             const std::vector<LayerInfo>& layers) {
  const pb::Pipeline& pipeline = plan.pipeline();
  if (pipeline.boundaries_size() > 0) {
    absl::flat_hash_map<std::string, int> index;
    for (int i = 0; i < static_cast<int>(layers.size()); ++i) index.emplace(layers[i].name, i);
    std::vector<int> starts = {0};
    for (const std::string& name : pipeline.boundaries()) starts.push_back(index.at(name));
    return starts;
  }
  if (pipeline.balance() == pb::PROFILE) {
    return absl::FailedPreconditionError(
        "pipeline.balance: PROFILE: the boundaries come from the plan balancer "
        "(ResolvePlan in runtime/estimate/resolve_plan.h), which runs before the analysis");
  }
  std::vector<double> costs;
  costs.reserve(layers.size());
  for (const LayerInfo& layer : layers) {
    costs.push_back(pipeline.balance() == pb::FLOPS ? layer.flops_per_sample
                                                    : static_cast<double>(layer.parameters));
  }
  return BalancePartition(costs, pipeline.stages() * pipeline.virtual_stages());
}

// Part s is virtual stage s, placed where `topology` puts it.
std::vector<StageInfo> BuildStages(const std::vector<int>& starts,
                                   const std::vector<LayerInfo>& layers,
                                   const schedule::Topology& topology) {
  std::vector<StageInfo> stages;
  for (int s = 0; s < static_cast<int>(starts.size()); ++s) {
    StageInfo stage;
    stage.part = s;
    const schedule::StageChunk at = topology.At(s);
    stage.stage = at.stage;
    stage.chunk = at.chunk;
    stage.first_layer = starts[s];
    stage.end_layer =
        s + 1 < static_cast<int>(starts.size()) ? starts[s + 1] : static_cast<int>(layers.size());
    stage.input_shape = layers[stage.first_layer].input_shape;
    stage.output_shape = layers[stage.end_layer - 1].output_shape;
    for (int l = stage.first_layer; l < stage.end_layer; ++l) {
      stage.parameters += layers[l].parameters;
      stage.product_parameters += layers[l].product_parameters;
      stage.flops_per_sample += layers[l].flops_per_sample;
      if (layers[l].splits_backward) stage.split_flops_per_sample += layers[l].flops_per_sample;
    }
    stages.push_back(std::move(stage));
  }
  return stages;
}

// "1 stage", "3 stages", "2 processes".
std::string Count(int64_t n, const std::string& noun) {
  if (n == 1) return absl::StrCat(n, " ", noun);
  return absl::StrCat(n, " ", noun, noun.back() == 's' ? "es" : "s");
}

}  // namespace

absl::StatusOr<AnalyzedPlan> AnalyzePlan(const LoadedPlan& loaded, const LayerRegistry& registry) {
  PlanErrors errors(loaded);
  pb::Plan plan = loaded.plan;
  ResolveCustomSchedule(loaded.directory, &plan, errors);
  ResolvePlacement(&plan, errors);
  ModelShapes shapes = InferModelShapes(plan, registry, errors);
  CheckPipeline(plan, errors);
  CheckTraining(plan, errors);
  CheckData(plan, loaded.directory, errors);
  CheckRuntime(plan, errors);
  CheckCheckpoint(plan, errors);
  RETURN_IF_ERROR(errors.ToStatus());
  GPIPE_CHECK(shapes.complete) << "a plan without errors has every layer's shape";
  CheckTokenIds(plan, shapes.num_classes, loaded.directory, errors);
  RETURN_IF_ERROR(errors.ToStatus());

  AnalyzedPlan analyzed;
  ASSIGN_OR_RETURN(const std::vector<int> starts, StageStarts(plan, shapes.layers));
  analyzed.stages = BuildStages(starts, shapes.layers, schedule::TopologyOf(plan.pipeline()));
  analyzed.layers = std::move(shapes.layers);
  analyzed.target_shape = std::move(shapes.target_shape);
  analyzed.target_dtype = shapes.target_dtype;
  analyzed.num_classes = shapes.num_classes;
  analyzed.ties = shapes.ties;
  analyzed.plan = plan;
  MakeDefaultsExplicit(&analyzed.plan);
  ResolveDataPaths(loaded.directory, &analyzed.plan);
  return analyzed;
}

absl::Status CheckWorldSize(const AnalyzedPlan& plan, const LoadedPlan& loaded, int world_size) {
  const int stages = plan.plan.pipeline().stages();
  const int replicas = plan.plan.pipeline().data_parallel();
  const int64_t needed = int64_t{stages} * replicas;
  if (world_size == needed) return absl::OkStatus();
  const auto where = [&](const std::string& field, int value) {
    return loaded.locations.contains(field)
               ? absl::StrCat(field, " at ", loaded.LocationOf(field))
               : absl::StrCat(field, " is not set in ", loaded.path, ", so ", value);
  };
  std::string needs = where("pipeline.stages", stages);
  if (replicas != 1 || loaded.locations.contains("pipeline.data_parallel")) {
    needs = absl::StrCat(stages, " stages x ", replicas, " replicas: ", needs, "; ",
                         where("pipeline.data_parallel", replicas));
  }
  const int layers = static_cast<int>(plan.layers.size());
  std::string remedy = absl::StrCat("launch with -n ", needed);
  if (replicas == 1 && world_size >= 1 && world_size <= layers) {
    absl::StrAppend(&remedy, " or set pipeline.stages: ", world_size);
  } else if (stages >= 1 && world_size >= 1 && world_size % stages == 0) {
    absl::StrAppend(&remedy, " or set pipeline.data_parallel: ", world_size / stages);
  } else if (world_size > layers) {
    absl::StrAppend(&remedy, " (the model's ", Count(layers, "layer"),
                    layers == 1 ? " allows" : " allow", " at most ", Count(layers, "stage"), ")");
  }
  return absl::InvalidArgumentError(absl::StrCat("the plan needs ", Count(needed, "process"), " (",
                                                 needs, ") but the job has ", world_size, "; ",
                                                 remedy));
}

}  // namespace gpipe

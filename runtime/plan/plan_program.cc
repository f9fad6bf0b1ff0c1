#include "runtime/plan/plan_program.h"

#include "absl/strings/str_cat.h"
#include "layers/skip_edges.h"
#include "runtime/core/status_macros.h"
#include "runtime/schedule/build_program.h"
#include "runtime/schedule/skip_transfers.h"

namespace gpipe {
namespace {

// The part holding model layer `layer`, or -1.
int PartOf(std::span<const pb::StageSpec> parts, int layer) {
  for (size_t p = 0; p < parts.size(); ++p) {
    if (layer >= parts[p].first_layer() && layer < parts[p].end_layer()) {
      return static_cast<int>(p);
    }
  }
  return -1;
}

absl::StatusOr<schedule::Program> WithSkips(absl::StatusOr<schedule::Program> program,
                                            const AnalyzedPlan& plan) {
  if (!program.ok()) return program.status();
  const std::vector<pb::StageSpec> parts = ToStageSpecs(plan);
  ASSIGN_OR_RETURN(std::vector<schedule::SkipRoute> routes, SkipRoutesOf(plan.plan.model(), parts));
  RETURN_IF_ERROR(schedule::AddSkipTransfers(std::move(routes), *program));
  return program;
}

}  // namespace

absl::StatusOr<std::vector<schedule::SkipRoute>> SkipRoutesOf(
    const pb::Model& model, std::span<const pb::StageSpec> parts) {
  ASSIGN_OR_RETURN(const std::vector<SkipEdge> edges, FindSkipEdges(model));
  std::vector<schedule::SkipRoute> routes;
  for (const SkipEdge& edge : edges) {
    const int from = PartOf(parts, edge.producer);
    const int to = PartOf(parts, edge.join);
    if (from < 0 || to < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("the skip connection from layer ", edge.producer, " to layer ", edge.join,
                       " has an end outside the partition's ", parts.size(), " part(s)"));
    }
    if (from != to) {
      routes.push_back({.layer = edge.join, .producer = edge.producer, .from = from, .to = to});
    }
  }
  return routes;
}

absl::StatusOr<schedule::Program> TrainingProgramOf(const AnalyzedPlan& plan) {
  return WithSkips(schedule::BuildPipelineProgram(plan.plan.pipeline()), plan);
}

absl::StatusOr<schedule::Program> EvalProgramOf(const AnalyzedPlan& plan) {
  return WithSkips(schedule::BuildEvalPipelineProgram(plan.plan.pipeline()), plan);
}

}  // namespace gpipe

#include "runtime/estimate/resolve_plan.h"

#include <utility>

#include "runtime/core/status_macros.h"
#include "runtime/estimate/plan_balance.h"
#include "runtime/plan/plan_analysis.h"

namespace gpipe {
namespace {

absl::StatusOr<LoadedPlan> Load(const PlanOrigin& origin,
                                const std::vector<std::string>& overrides) {
  if (const auto* text = std::get_if<PlanText>(&origin)) {
    return ParsePlanText(text->text, text->name, text->directory, overrides);
  }
  return LoadPlanFile(std::get<PlanFile>(origin).path, overrides);
}

}  // namespace

absl::StatusOr<ResolvedPlan> ResolvePlan(const PlanOrigin& origin,
                                         const std::vector<std::string>& overrides,
                                         const LayerRegistry& registry,
                                         const ResolveOptions& options) {
  ASSIGN_OR_RETURN(LoadedPlan loaded, Load(origin, overrides));
  // Custom layers are built for the device the plan runs on (a type without kernels for it is
  // a plan error at its layer).
  LayerRegistry for_device = registry.ForDevice(loaded.plan.runtime().device());
  if (options.check_loaded != nullptr) RETURN_IF_ERROR(options.check_loaded(loaded));
  if (options.resolve_profile_balance) {
    RETURN_IF_ERROR(ResolveProfileBalance(loaded, for_device));
  } else if (loaded.plan.pipeline().balance() == pb::PROFILE) {
    loaded.plan.mutable_pipeline()->set_balance(pb::PARAMETERS);
  }
  ASSIGN_OR_RETURN(AnalyzedPlan analyzed, AnalyzePlan(loaded, for_device));
  return ResolvedPlan{.loaded = std::move(loaded),
                      .registry = std::move(for_device),
                      .analyzed = std::move(analyzed)};
}

}  // namespace gpipe

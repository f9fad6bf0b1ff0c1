// ResolvePlan: the one way a plan becomes an analyzed plan, for every entry point (gpipe-plan,
// gpipe-run, and rank 0's ResolveJob, which gpipe-worker and the embedding API run): load the
// file or text with its --override fragments (plan_loader.h), resolve pipeline.balance: PROFILE
// into boundaries (plan_balance.h), then validate and analyze (AnalyzePlan). All of them thus
// see the same partition and report the same errors, with the same file:line:col. Pure: no MPI,
// no device.
#ifndef GPIPE_RUNTIME_ESTIMATE_RESOLVE_PLAN_H_
#define GPIPE_RUNTIME_ESTIMATE_RESOLVE_PLAN_H_

#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "layers/registry.h"
#include "runtime/plan/analyzed_plan.h"
#include "runtime/plan/plan_loader.h"

namespace gpipe {

// A plan file (LoadPlanFile), or plan text standing for one (ParsePlanText): `name` stands for
// the file in messages and locations, `directory` is where its relative data paths resolve.
struct PlanFile {
  std::string path;
};
struct PlanText {
  std::string text;
  std::string name;
  std::string directory;
};
using PlanOrigin = std::variant<PlanFile, PlanText>;

struct ResolvedPlan {
  LoadedPlan loaded;       // the plan as loaded, with a PROFILE balance's boundaries set
  LayerRegistry registry;  // the caller's, building custom layers for the plan's runtime.device
  AnalyzedPlan analyzed;
};

struct ResolveOptions {
  // Run on the loaded plan before the balance, its error returned as it is: a caller's own
  // refusal (rank 0: a custom data source its program does not register) comes before the
  // balance's cost and the analysis' messages.
  std::function<absl::Status(const LoadedPlan&)> check_loaded;
  // False for `gpipe-plan profile`, which times layers one by one: the partition does not
  // matter, and a PROFILE balance would need the profile being written, so such a plan is
  // analyzed as balance PARAMETERS.
  bool resolve_profile_balance = true;
};

absl::StatusOr<ResolvedPlan> ResolvePlan(const PlanOrigin& origin,
                                         const std::vector<std::string>& overrides,
                                         const LayerRegistry& registry,
                                         const ResolveOptions& options = {});

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_ESTIMATE_RESOLVE_PLAN_H_

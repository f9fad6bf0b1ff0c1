// Making a plan self-describing before it is shipped to the workers: every scalar that declares
// a default gets it written out explicitly, and data paths become relative to the working
// directory instead of the plan file. Internal to the plan module.
#ifndef GPIPE_RUNTIME_PLAN_PLAN_DEFAULTS_H_
#define GPIPE_RUNTIME_PLAN_PLAN_DEFAULTS_H_

#include <string>

#include "proto/plan.pb.h"

namespace gpipe {

// Sets every unset singular scalar that declares a default ([default = ...] in plan.proto) to
// it, in every message of the plan. Singular sub-messages outside a oneof (pipeline, runtime,
// runtime.timeouts, ...) are created so their defaults appear; a oneof keeps its chosen member.
// Fields without a declared default (metrics_out, sgd.lr) stay unset: unset means something.
void MakeDefaultsExplicit(pb::Plan* plan);

// `path` when absolute, else `directory`/`path`, lexically normalized ("./a/../b" -> "b").
std::string ResolvePlanPath(const std::string& directory, const std::string& path);

// Rewrites every data file path (npy inputs, targets and eval files; idx train and test files;
// text paths) with ResolvePlanPath.
void ResolveDataPaths(const std::string& directory, pb::Plan* plan);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_PLAN_PLAN_DEFAULTS_H_

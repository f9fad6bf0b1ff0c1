// Text-proto parsing with positions: parses one plan text strictly (unknown fields and enum
// values are errors) and returns where every field was written, keyed by field path
// ("model.layers[2].linear.out_features"). Internal to the plan module.
#ifndef GPIPE_RUNTIME_PLAN_TEXT_PARSE_H_
#define GPIPE_RUNTIME_PLAN_TEXT_PARSE_H_

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "proto/plan.pb.h"
#include "runtime/plan/plan_loader.h"

namespace gpipe {

using LocationMap = absl::flat_hash_map<std::string, SourceLocation>;

// The deepest message nesting a plan may have (about 45 residual blocks inside each other).
inline constexpr int kMaxPlanNesting = 100;

// Parses `text` into `*plan` (cleared first) and fills `*locations`. On failure returns
// INVALID_ARGUMENT with one "source_name:line:col: message" line per parser error.
absl::Status ParsePlanWithLocations(const std::string& text, const std::string& source_name,
                                    pb::Plan* plan, LocationMap* locations);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_PLAN_TEXT_PARSE_H_

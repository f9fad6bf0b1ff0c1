// What the plan-section checks (pipeline_checks.cc, training_checks.cc, data_checks.cc,
// runtime_checks.cc) share: how a number is judged and shown in a message, and the model's
// layer names for lookups and for "name one of: ..." help. Internal to the plan module.
#ifndef GPIPE_RUNTIME_PLAN_SETTINGS_CHECK_HELPERS_H_
#define GPIPE_RUNTIME_PLAN_SETTINGS_CHECK_HELPERS_H_

#include <string>

#include "absl/container/flat_hash_map.h"
#include "proto/plan.pb.h"

namespace gpipe {

// Finite and > 0.
bool Positive(double value);

// The value as a message shows it ("0.1", "inf", "nan").
std::string Show(double value);

// Indices of the layers by name (the first one when names repeat; that is reported elsewhere).
absl::flat_hash_map<std::string, int> LayerIndex(const pb::Model& model);

// The first dozen layer names, comma-separated ("..." after them when there are more).
std::string LayerNamesForHelp(const pb::Model& model);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_PLAN_SETTINGS_CHECK_HELPERS_H_

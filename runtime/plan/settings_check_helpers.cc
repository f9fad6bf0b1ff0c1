#include "runtime/plan/settings_check_helpers.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpipe {

bool Positive(double value) { return std::isfinite(value) && value > 0; }

std::string Show(double value) { return absl::StrCat(value); }

absl::flat_hash_map<std::string, int> LayerIndex(const pb::Model& model) {
  absl::flat_hash_map<std::string, int> index;
  for (int i = 0; i < model.layers_size(); ++i) index.emplace(model.layers(i).name(), i);
  return index;
}

std::string LayerNamesForHelp(const pb::Model& model) {
  constexpr int kMaxNames = 12;
  std::vector<std::string> names;
  for (int i = 0; i < model.layers_size() && i < kMaxNames; ++i) {
    names.push_back(model.layers(i).name());
  }
  if (model.layers_size() > kMaxNames) names.push_back("...");
  return absl::StrJoin(names, ", ");
}

}  // namespace gpipe

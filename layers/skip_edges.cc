#include "layers/skip_edges.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace gpipe {

bool IsSkipJoin(const pb::Layer& spec) { return spec.has_skip_add() || spec.has_skip_concat(); }

const std::string& SkipFromOf(const pb::Layer& spec) {
  if (spec.has_skip_add()) return spec.skip_add().from();
  return spec.skip_concat().from();  // "" when unset, and for every other kind
}

absl::StatusOr<std::vector<SkipEdge>> FindSkipEdges(const pb::Model& model) {
  absl::flat_hash_map<std::string, int> index;
  for (int i = 0; i < model.layers_size(); ++i) index.try_emplace(model.layers(i).name(), i);
  std::vector<SkipEdge> edges;
  for (int i = 0; i < model.layers_size(); ++i) {
    const pb::Layer& spec = model.layers(i);
    if (!IsSkipJoin(spec)) continue;
    const std::string kind = spec.has_skip_add() ? "skip_add" : "skip_concat";
    const std::string& from = SkipFromOf(spec);
    const std::string label = absl::StrCat("layer '", spec.name(), "' (", kind, ")");
    if (from.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, " has no `from`; name the earlier layer whose output it ",
                       spec.has_skip_add() ? "adds" : "concatenates"));
    }
    const auto it = index.find(from);
    if (it == index.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": from '", from, "' names no layer of the model"));
    }
    if (it->second >= i) {
      return absl::InvalidArgumentError(absl::StrCat(
          label, ": from '", from, "' is ", it->second == i ? "the layer itself" : "a later layer",
          " (model.layers[", it->second, "]); a skip connection reads an earlier layer's output"));
    }
    edges.push_back({.producer = it->second, .join = i});
  }
  return edges;
}

}  // namespace gpipe

#include "runtime/plan/sim_profile.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "runtime/core/json.h"
#include "runtime/core/json_fields.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

absl::Status Bad(const std::string& source, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("sim profile ", source, ": ", what));
}

absl::StatusOr<double> TimeField(const Json& layer, const char* key, const std::string& path,
                                 const std::string& source) {
  const Json* value = JsonFind(layer, key);
  if (value == nullptr || !value->is_number() || !std::isfinite(value->get<double>()) ||
      value->get<double>() < 0) {
    return Bad(source, absl::StrCat(path, ".", key, " must be a number >= 0 (microseconds)"));
  }
  return value->get<double>();
}

}  // namespace

absl::StatusOr<SimProfile> ParseSimProfile(const std::string& json, const std::string& source) {
  absl::StatusOr<Json> root = ParseJson(json, "the profile");
  if (!root.ok()) return Bad(source, std::string(root.status().message()));
  if (!root->is_object()) return Bad(source, "the top level must be a JSON object");
  SimProfile profile;
  if (const Json* device = JsonFind(*root, "device"); device != nullptr && device->is_string()) {
    profile.device = device->get<std::string>();
  }
  const Json* micro_batch = JsonFind(*root, "micro_batch");
  const std::optional<int64_t> samples =
      micro_batch != nullptr ? JsonAsInt64(*micro_batch) : std::nullopt;
  if (!samples.has_value() || *samples < 1) {
    return Bad(source, "micro_batch must be an integer >= 1 (the samples each time is for)");
  }
  profile.micro_batch = *samples;
  const Json* layers = JsonFind(*root, "layers");
  if (layers == nullptr || !layers->is_array()) {
    return Bad(source,
               "layers must be an array of {name, forward_us, backward_input_us, "
               "backward_weight_us}");
  }
  for (size_t i = 0; i < layers->size(); ++i) {
    const Json& layer = (*layers)[i];
    const std::string path = absl::StrCat("layers[", i, "]");
    if (!layer.is_object()) return Bad(source, absl::StrCat(path, " must be an object"));
    const Json* name = JsonFind(layer, "name");
    if (name == nullptr || !name->is_string() || name->get_ref<const std::string&>().empty()) {
      return Bad(source, absl::StrCat(path, ".name must be a non-empty string"));
    }
    SimLayerTimesUs times;
    ASSIGN_OR_RETURN(times.forward, TimeField(layer, "forward_us", path, source));
    ASSIGN_OR_RETURN(times.backward_input, TimeField(layer, "backward_input_us", path, source));
    ASSIGN_OR_RETURN(times.backward_weight, TimeField(layer, "backward_weight_us", path, source));
    profile.layers.try_emplace(name->get<std::string>(), times);
  }
  return profile;
}

absl::StatusOr<SimProfile> LoadSimProfile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("sim profile ", path, " cannot be read (missing or not readable)"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("sim profile ", path, ": read error"));
  return ParseSimProfile(text.str(), path);
}

}  // namespace gpipe

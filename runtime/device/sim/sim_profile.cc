#include "runtime/device/sim/sim_profile.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "runtime/ckpt/json_parser.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

absl::Status Bad(const std::string& source, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("sim profile ", source, ": ", what));
}

absl::StatusOr<double> TimeField(const JsonValue& layer, const char* key, const std::string& path,
                                 const std::string& source) {
  const JsonValue* value = layer.Find(key);
  if (value == nullptr || !value->is_number() || !std::isfinite(value->number_value()) ||
      value->number_value() < 0) {
    return Bad(source, absl::StrCat(path, ".", key, " must be a number >= 0 (microseconds)"));
  }
  return value->number_value();
}

}  // namespace

absl::StatusOr<SimProfile> ParseSimProfile(const std::string& json, const std::string& source) {
  absl::StatusOr<JsonValue> root = ParseJson(json);
  if (!root.ok()) return Bad(source, std::string(root.status().message()));
  if (!root->is_object()) return Bad(source, "the top level must be a JSON object");
  SimProfile profile;
  if (const JsonValue* device = root->Find("device"); device != nullptr && device->is_string()) {
    profile.device = device->string_value();
  }
  const JsonValue* micro_batch = root->Find("micro_batch");
  const std::optional<int64_t> samples =
      micro_batch != nullptr && micro_batch->is_number() ? micro_batch->AsInt64() : std::nullopt;
  if (!samples.has_value() || *samples < 1) {
    return Bad(source, "micro_batch must be an integer >= 1 (the samples each time is for)");
  }
  profile.micro_batch = *samples;
  const JsonValue* layers = root->Find("layers");
  if (layers == nullptr || !layers->is_array()) {
    return Bad(source, "layers must be an array of {name, forward_us, backward_input_us, "
                       "backward_weight_us}");
  }
  for (size_t i = 0; i < layers->items().size(); ++i) {
    const JsonValue& layer = layers->items()[i];
    const std::string path = absl::StrCat("layers[", i, "]");
    if (!layer.is_object()) return Bad(source, absl::StrCat(path, " must be an object"));
    const JsonValue* name = layer.Find("name");
    if (name == nullptr || !name->is_string() || name->string_value().empty()) {
      return Bad(source, absl::StrCat(path, ".name must be a non-empty string"));
    }
    SimLayerTimesUs times;
    ASSIGN_OR_RETURN(times.forward, TimeField(layer, "forward_us", path, source));
    ASSIGN_OR_RETURN(times.backward_input, TimeField(layer, "backward_input_us", path, source));
    ASSIGN_OR_RETURN(times.backward_weight, TimeField(layer, "backward_weight_us", path, source));
    profile.layers.try_emplace(name->string_value(), times);
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

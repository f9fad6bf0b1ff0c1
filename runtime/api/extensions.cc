#include "gpipe/extensions.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

// A map's value by key, or INVALID_ARGUMENT naming `where` and the key.
template <typename Map>
auto Lookup(const Map& map, const std::string& key, const std::string& where)
    -> absl::StatusOr<typename Map::mapped_type> {
  const auto it = map.find(key);
  if (it == map.end()) {
    return absl::InvalidArgumentError(absl::StrCat(where, " has no '", key, "'"));
  }
  return it->second;
}

// The registry's factory for one device from the program's.
LeafLayerFactory Adapt(CustomLayerFactory factory) {
  return [factory = std::move(factory)](const pb::Layer& spec, const Shape& input_shape) {
    return factory(LayerArgs(spec, input_shape));
  };
}

}  // namespace

absl::StatusOr<double> LayerArgs::Number(const std::string& key) const {
  return Lookup(spec_.custom().numbers(), key, "custom.numbers");
}
double LayerArgs::NumberOr(const std::string& key, double fallback) const {
  const auto it = spec_.custom().numbers().find(key);
  return it == spec_.custom().numbers().end() ? fallback : it->second;
}
absl::StatusOr<std::string> LayerArgs::String(const std::string& key) const {
  return Lookup(spec_.custom().strings(), key, "custom.strings");
}
std::string LayerArgs::StringOr(const std::string& key, const std::string& fallback) const {
  const auto it = spec_.custom().strings().find(key);
  return it == spec_.custom().strings().end() ? fallback : it->second;
}

absl::StatusOr<double> DataSourceArgs::Number(const std::string& key) const {
  return Lookup(settings_.numbers(), key, "data.custom.numbers");
}
double DataSourceArgs::NumberOr(const std::string& key, double fallback) const {
  const auto it = settings_.numbers().find(key);
  return it == settings_.numbers().end() ? fallback : it->second;
}
absl::StatusOr<std::string> DataSourceArgs::String(const std::string& key) const {
  return Lookup(settings_.strings(), key, "data.custom.strings");
}
std::string DataSourceArgs::StringOr(const std::string& key, const std::string& fallback) const {
  const auto it = settings_.strings().find(key);
  return it == settings_.strings().end() ? fallback : it->second;
}

Extensions::Extensions() : layers_(LayerRegistry::WithBuiltins()) {}

absl::Status Extensions::AddLayer(CustomLayerType layer) {
  if (layer.type.empty()) return absl::InvalidArgumentError("a custom layer type needs a name");
  if (layer.cpu == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "custom layer type '", layer.type, "' has no CPU factory; every custom layer needs one"));
  }
  if (layers_.ContainsCustom(layer.type)) {
    return absl::AlreadyExistsError(
        absl::StrCat("custom layer type '", layer.type, "' is registered twice"));
  }
  RETURN_IF_ERROR(layers_.RegisterCustom(layer.type, pb::CPU, Adapt(std::move(layer.cpu))));
  if (layer.cuda != nullptr) {
    RETURN_IF_ERROR(layers_.RegisterCustom(layer.type, pb::CUDA, Adapt(std::move(layer.cuda))));
  }
  if (layer.sim != nullptr) {
    RETURN_IF_ERROR(layers_.RegisterCustom(layer.type, pb::SIM, Adapt(std::move(layer.sim))));
  }
  return absl::OkStatus();
}

absl::Status Extensions::AddDataSource(std::string name, CustomDataFactory factory) {
  if (factory == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("data source '", name, "' has no factory"));
  }
  return data_sources_.Register(
      std::move(name),
      [factory = std::move(factory)](const pb::CustomData& settings,
                                     const DataRequirements& requirements, DataSplit split) {
        return factory(DataSourceArgs(settings, requirements, split));
      });
}

}  // namespace gpipe

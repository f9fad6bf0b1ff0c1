#include "layers/registry.h"

#include "absl/strings/str_cat.h"
#include "layers/linear.h"

namespace gpipe {

LayerRegistry LayerRegistry::WithBuiltins() {
  LayerRegistry registry;
  registry.factories_.emplace("linear", &Linear::Create);
  return registry;
}

absl::Status LayerRegistry::Register(std::string kind, LayerFactory factory) {
  if (!factories_.emplace(kind, std::move(factory)).second) {
    return absl::AlreadyExistsError(absl::StrCat("layer kind '", kind, "' is already registered"));
  }
  return absl::OkStatus();
}

std::string LayerRegistry::KindOf(const pb::Layer& spec) {
  const auto* oneof = spec.GetDescriptor()->FindOneofByName("kind");
  const auto* field = spec.GetReflection()->GetOneofFieldDescriptor(spec, oneof);
  return field == nullptr ? "" : std::string(field->name());
}

absl::StatusOr<std::unique_ptr<Layer>> LayerRegistry::Create(const pb::Layer& spec,
                                                             const Shape& input_shape) const {
  const std::string kind = KindOf(spec);
  if (kind.empty()) {
    return absl::InvalidArgumentError("layer has no kind (set one of linear, relu, gelu, ...)");
  }
  auto it = factories_.find(kind);
  if (it == factories_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("layer kind '", kind, "' is not registered"));
  }
  return it->second(spec, input_shape);
}

}  // namespace gpipe

namespace gpipe {
// Replaced by the losses (softmax_cross_entropy, mse) as they land.
absl::StatusOr<std::unique_ptr<Loss>> CreateLoss(const pb::Loss& spec) {
  return absl::UnimplementedError("losses are not built yet");
}
}  // namespace gpipe

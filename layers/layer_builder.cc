#include "layers/layer_builder.h"

namespace gpipe {

std::string LayerKindName(const pb::Layer& spec) {
  const auto* oneof = spec.GetDescriptor()->FindOneofByName("kind");
  const auto* field = spec.GetReflection()->GetOneofFieldDescriptor(spec, oneof);
  return field == nullptr ? "" : std::string(field->name());
}

}  // namespace gpipe

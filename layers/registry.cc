#include "layers/registry.h"

#include "absl/strings/str_cat.h"
#include "layers/dropout.h"
#include "layers/gelu.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/mse.h"
#include "layers/relu.h"
#include "layers/softmax_cross_entropy.h"
#include "layers/tanh.h"

namespace gpipe {

LayerRegistry LayerRegistry::WithBuiltins() {
  LayerRegistry registry;
  registry.factories_.emplace("linear", &Linear::Create);
  registry.factories_.emplace("relu", &Relu::Create);
  registry.factories_.emplace("gelu", &Gelu::Create);
  registry.factories_.emplace("tanh", &Tanh::Create);
  registry.factories_.emplace("layer_norm", &LayerNorm::Create);
  registry.factories_.emplace("dropout", &Dropout::Create);
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

absl::StatusOr<std::unique_ptr<Loss>> CreateLoss(const pb::Loss& spec) {
  switch (spec.kind_case()) {
    case pb::Loss::kSoftmaxCrossEntropy:
      return std::unique_ptr<Loss>(new SoftmaxCrossEntropy());
    case pb::Loss::kMse:
      return std::unique_ptr<Loss>(new Mse());
    case pb::Loss::KIND_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(
      "model.loss has no kind: set one of softmax_cross_entropy {} or mse {}");
}

}  // namespace gpipe

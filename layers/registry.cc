#include "layers/registry.h"

#include "absl/strings/str_cat.h"
#include "runtime/core/check.h"
#include "layers/batch_norm.h"
#include "layers/causal_self_attention.h"
#include "layers/conv2d.h"
#include "layers/dropout.h"
#include "layers/embedding.h"
#include "layers/flatten.h"
#include "layers/gelu.h"
#include "layers/global_avg_pool2d.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/mse.h"
#include "layers/pool2d.h"
#include "layers/positional_embedding.h"
#include "layers/relu.h"
#include "layers/residual.h"
#include "layers/softmax_cross_entropy.h"
#include "layers/tanh.h"
#include "layers/transformer_block.h"

namespace gpipe {

LayerRegistry LayerRegistry::WithBuiltins() {
  LayerRegistry registry;
  const std::pair<const char*, LeafLayerFactory> leaves[] = {
      {"linear", &Linear::Create},
      {"relu", &Relu::Create},
      {"gelu", &Gelu::Create},
      {"tanh", &Tanh::Create},
      {"layer_norm", &LayerNorm::Create},
      {"dropout", &Dropout::Create},
      {"batch_norm1d", &BatchNorm::Create},
      {"batch_norm2d", &BatchNorm::Create},
      {"conv2d", &Conv2d::Create},
      {"max_pool2d", &MaxPool2d::Create},
      {"avg_pool2d", &AvgPool2d::Create},
      {"global_avg_pool2d", &GlobalAvgPool2d::Create},
      {"flatten", &Flatten::Create},
      {"embedding", &Embedding::Create},
      {"positional_embedding", &PositionalEmbedding::Create},
      {"causal_self_attention", &CausalSelfAttention::Create},
  };
  for (const auto& [kind, factory] : leaves) {
    GPIPE_CHECK(registry.Register(kind, factory).ok()) << kind;
  }
  const std::pair<const char*, LayerFactory> composites[] = {
      {"residual", &Residual::Create},
      {"transformer_block", &TransformerBlock::Create},
  };
  for (const auto& [kind, factory] : composites) {
    GPIPE_CHECK(registry.Register(kind, factory).ok()) << kind;
  }
  return registry;
}

absl::Status LayerRegistry::Register(std::string kind, LayerFactory factory) {
  if (!factories_.emplace(kind, std::move(factory)).second) {
    return absl::AlreadyExistsError(absl::StrCat("layer kind '", kind, "' is already registered"));
  }
  return absl::OkStatus();
}

absl::Status LayerRegistry::Register(std::string kind, LeafLayerFactory factory) {
  return Register(std::move(kind),
                  [leaf = std::move(factory)](const pb::Layer& spec, const Shape& input_shape,
                                              const LayerRegistry&) {
                    return leaf(spec, input_shape);
                  });
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
  return it->second(spec, input_shape, *this);
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

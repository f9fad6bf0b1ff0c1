#include "layers/registry.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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
#include "layers/llama_block.h"
#include "layers/mse.h"
#include "layers/pool2d.h"
#include "layers/positional_embedding.h"
#include "layers/relu.h"
#include "layers/residual.h"
#include "layers/rms_norm.h"
#include "layers/skip_add.h"
#include "layers/skip_concat.h"
#include "layers/softmax_cross_entropy.h"
#include "layers/tanh.h"
#include "layers/transformer_block.h"
#include "runtime/core/check.h"

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
      {"rms_norm", &RmsNorm::Create},
      {"llama_block", &LlamaBlock::Create},
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
  return Register(std::move(kind), [leaf = std::move(factory)](
                                       const pb::Layer& spec, const Shape& input_shape,
                                       InnerLayerBuilder) { return leaf(spec, input_shape); });
}

absl::Status LayerRegistry::RegisterCustom(std::string type, pb::Device device,
                                           LeafLayerFactory factory) {
  if (type.empty()) return absl::InvalidArgumentError("a custom layer type needs a name");
  if (factory == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "custom layer type '", type, "' has no factory for ", pb::Device_Name(device)));
  }
  if (!custom_[type].emplace(device, std::move(factory)).second) {
    return absl::AlreadyExistsError(absl::StrCat(
        "custom layer type '", type, "' already has a factory for ", pb::Device_Name(device)));
  }
  return absl::OkStatus();
}

LayerRegistry LayerRegistry::ForDevice(pb::Device device) const {
  LayerRegistry copy = *this;
  copy.device_ = device;
  return copy;
}

absl::StatusOr<std::unique_ptr<Layer>> LayerRegistry::CreateCustom(const pb::Layer& spec,
                                                                   const Shape& input_shape) const {
  const std::string& type = spec.custom().type();
  if (type.empty()) {
    return absl::InvalidArgumentError(
        "custom.type is missing; name the type the program registered");
  }
  const auto it = custom_.find(type);
  if (it == custom_.end()) {
    std::vector<std::string> known;
    for (const auto& [name, factories] : custom_) known.push_back(name);
    std::sort(known.begin(), known.end());
    return absl::NotFoundError(
        absl::StrCat("custom layer type '", type, "' is not registered by this program (",
                     known.empty() ? std::string("it registers none")
                                   : absl::StrCat("it registers ", absl::StrJoin(known, ", ")),
                     "); only the program that registers a custom layer can run its plan"));
  }
  const auto factory = it->second.find(device_);
  if (factory == it->second.end()) {
    std::vector<std::string> devices;
    for (const auto& [device, f] : it->second) {
      devices.push_back(pb::Device_Name(static_cast<pb::Device>(device)));
    }
    std::sort(devices.begin(), devices.end());
    return absl::FailedPreconditionError(absl::StrCat(
        "custom layer type '", type, "' has kernels for ", absl::StrJoin(devices, ", "),
        " but not for runtime.device ", pb::Device_Name(device_)));
  }
  return factory->second(spec, input_shape);
}

absl::StatusOr<std::unique_ptr<Layer>> LayerRegistry::Create(const pb::Layer& spec,
                                                             const Shape& input_shape,
                                                             const Shape* skip_shape) const {
  const std::string kind = KindOf(spec);
  if (kind.empty()) {
    return absl::InvalidArgumentError("layer has no kind (set one of linear, relu, gelu, ...)");
  }
  if (spec.has_custom()) return CreateCustom(spec, input_shape);
  if (spec.has_skip_add() || spec.has_skip_concat()) {
    if (skip_shape == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(kind, " joins the output of another model layer, so it must be a layer of ",
                       "model.layers itself (not inside a residual or transformer_block)"));
    }
    return spec.has_skip_add() ? SkipAdd::Create(spec, input_shape, *skip_shape)
                               : SkipConcat::Create(spec, input_shape, *skip_shape);
  }
  auto it = factories_.find(kind);
  if (it == factories_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("layer kind '", kind, "' is not registered"));
  }
  return it->second(spec, input_shape, [this](const pb::Layer& inner, const Shape& inner_input) {
    return Create(inner, inner_input);
  });
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

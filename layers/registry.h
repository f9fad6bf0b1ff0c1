// LayerRegistry: builds Layer objects from plan entries, by the name of the plan's layer kind
// ("linear", "relu", ...). An ordinary object, not a global: WithBuiltins() returns one that
// knows every layer in this directory. Embedding programs add custom layer types (plan: custom
// { type: ... }) with one factory per device kind they have kernels for (RegisterCustom); a
// registry resolves them for one runtime.device (ForDevice; CPU unless said otherwise).
#ifndef GPIPE_LAYERS_REGISTRY_H_
#define GPIPE_LAYERS_REGISTRY_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "layers/layer.h"
#include "layers/layer_builder.h"
#include "layers/loss.h"
#include "proto/plan.pb.h"

namespace gpipe {

// Builds a layer from its plan entry and per-sample input shape; rejects bad configuration or
// an input shape the layer cannot take with INVALID_ARGUMENT naming the problem (the caller
// adds the layer name and plan location).
using LeafLayerFactory = std::function<absl::StatusOr<std::unique_ptr<Layer>>(
    const pb::Layer& spec, const Shape& input_shape)>;
// A factory for layers that contain layers (residual): it builds them through `build_inner`
// (the registry itself).
using LayerFactory = std::function<absl::StatusOr<std::unique_ptr<Layer>>(
    const pb::Layer& spec, const Shape& input_shape, InnerLayerBuilder build_inner)>;

class LayerRegistry {
 public:
  static LayerRegistry WithBuiltins();

  // Fails with ALREADY_EXISTS if `kind` is taken.
  absl::Status Register(std::string kind, LayerFactory factory);
  absl::Status Register(std::string kind, LeafLayerFactory factory);
  bool Contains(const std::string& kind) const { return factories_.contains(kind); }

  // Adds `device`'s factory of the custom layer type `type`: the layer whose Forward and
  // Backward run on that device kind. INVALID_ARGUMENT for an empty type or a null factory;
  // ALREADY_EXISTS when the type already has a factory for `device`.
  absl::Status RegisterCustom(std::string type, pb::Device device, LeafLayerFactory factory);
  bool ContainsCustom(const std::string& type) const { return custom_.contains(type); }
  // A copy whose custom layers are built with their `device` factories.
  LayerRegistry ForDevice(pb::Device device) const;

  // The plan entry's kind name ("" when none is set; "custom" for a custom type).
  static std::string KindOf(const pb::Layer& spec) { return LayerKindName(spec); }
  // A custom type without a factory for this registry's device is FAILED_PRECONDITION naming
  // the devices it has; an unknown custom type is NOT_FOUND naming the registered ones.
  // A skip join (skip_add, skip_concat) also needs the per-sample shape of the output it reads
  // (`skip_shape`); without one (inside a residual, say) it is INVALID_ARGUMENT.
  absl::StatusOr<std::unique_ptr<Layer>> Create(const pb::Layer& spec, const Shape& input_shape,
                                                const Shape* skip_shape = nullptr) const;

 private:
  absl::StatusOr<std::unique_ptr<Layer>> CreateCustom(const pb::Layer& spec,
                                                      const Shape& input_shape) const;

  absl::flat_hash_map<std::string, LayerFactory> factories_;
  // Custom type -> runtime.device -> factory.
  absl::flat_hash_map<std::string, absl::flat_hash_map<int, LeafLayerFactory>> custom_;
  pb::Device device_ = pb::CPU;
};

// Builds the plan's loss.
absl::StatusOr<std::unique_ptr<Loss>> CreateLoss(const pb::Loss& spec);

}  // namespace gpipe

#endif  // GPIPE_LAYERS_REGISTRY_H_

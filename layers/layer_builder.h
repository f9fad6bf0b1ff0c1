// InnerLayerBuilder: how a layer that holds layers (residual, transformer_block) builds each of
// them from its plan entry and input shape. The registry hands itself in as one, so the
// composites never include it (the registry is above them: it knows every layer).
#ifndef GPIPE_LAYERS_LAYER_BUILDER_H_
#define GPIPE_LAYERS_LAYER_BUILDER_H_

#include <memory>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "layers/layer.h"
#include "proto/plan.pb.h"
#include "runtime/core/shape.h"

namespace gpipe {

// Builds one inner layer; errors as the registry's (INVALID_ARGUMENT naming the problem).
using InnerLayerBuilder = absl::FunctionRef<absl::StatusOr<std::unique_ptr<Layer>>(
    const pb::Layer& spec, const Shape& input_shape)>;

// The plan entry's kind name ("" when none is set; "custom" for a custom type).
std::string LayerKindName(const pb::Layer& spec);

}  // namespace gpipe

#endif  // GPIPE_LAYERS_LAYER_BUILDER_H_

// Parameter initialization from a ParamSpec: zeros, ones, U(-bound, bound) or N(0, bound^2),
// where element i is the i-th uniform (or normal) draw of
// RandomStream(seed, {kInitStreamTag, layer_index, param_index}).
// Values depend only on (seed, the layer's index in the model, the parameter's index in the
// layer's parameter_specs()), never on the partition into stages or on the rank.
#ifndef GPIPE_LAYERS_PARAMETER_INIT_H_
#define GPIPE_LAYERS_PARAMETER_INIT_H_

#include <cstdint>

#include "absl/status/status.h"
#include "layers/layer.h"
#include "runtime/core/tensor.h"

namespace gpipe {

// First key word of parameter initialization's random streams ("init" in ASCII).
inline constexpr uint64_t kInitStreamTag = 0x74696E69ull;

// Fills `value` (a host-accessible f32 tensor shaped spec.shape) as `spec` says. Fails with
// INVALID_ARGUMENT on a shape or dtype mismatch or a negative or non-finite uniform bound.
absl::Status InitializeParameter(const ParamSpec& spec, uint64_t seed, int layer_index,
                                 int param_index, Tensor& value);

}  // namespace gpipe

#endif  // GPIPE_LAYERS_PARAMETER_INIT_H_

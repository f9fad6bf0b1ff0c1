// Parameter initialization from a ParamSpec: zeros, ones, U(-bound, bound) or N(0, bound^2),
// where element i is the i-th uniform (or normal) draw of
// RandomStream(seed, {kInitStreamTag, layer_index, param_index}).
// Values depend only on (seed, the layer's index in the model, the parameter's index in the
// layer's parameter_specs()), never on the partition into stages, the rank or the backend: the
// values are written on the device by TensorOps::Fill / FillRandom.
#ifndef GPIPE_LAYERS_PARAMETER_INIT_H_
#define GPIPE_LAYERS_PARAMETER_INIT_H_

#include <cstdint>

#include "absl/status/status.h"
#include "layers/layer.h"
#include "runtime/core/tensor.h"
#include "runtime/device/device.h"

namespace gpipe {

// First key word of parameter initialization's random streams ("init" in ASCII).
inline constexpr uint64_t kInitStreamTag = 0x74696E69ull;

// Fills `value` (an f32 tensor shaped spec.shape in `device`'s memory) as `spec` says, through
// the device's ops. Fails with INVALID_ARGUMENT on a shape or dtype mismatch or a negative or
// non-finite bound.
absl::Status InitializeParameter(Device& device, const ParamSpec& spec, uint64_t seed,
                                 int layer_index, int param_index, Tensor& value);

}  // namespace gpipe

#endif  // GPIPE_LAYERS_PARAMETER_INIT_H_

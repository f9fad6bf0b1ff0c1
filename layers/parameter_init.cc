#include "layers/parameter_init.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "runtime/device/ops.h"

namespace gpipe {

absl::Status InitializeParameter(Device& device, const ParamSpec& spec, uint64_t seed,
                                 int layer_index, int param_index, Tensor& value) {
  if (!value.defined() || value.dtype() != DType::kF32 || value.shape() != spec.shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        "parameter '", spec.name, "' (layer ", layer_index, ", parameter ", param_index,
        ") must be an f32 tensor of shape ", spec.shape.ToString(), ", got ", value.DebugString()));
  }
  const TensorOps& ops = device.ops().tensor;
  const RandomKey key{.seed = seed,
                      .key = {kInitStreamTag, static_cast<uint64_t>(layer_index),
                              static_cast<uint64_t>(param_index)},
                      .first_word = 0};
  switch (spec.init) {
    case ParamInit::kZeros:
      return ops.Fill(value, 0.0);
    case ParamInit::kOnes:
      return ops.Fill(value, 1.0);
    case ParamInit::kUniform:
      if (!(spec.bound >= 0.0) || !std::isfinite(spec.bound)) {
        return absl::InvalidArgumentError(
            absl::StrCat("parameter '", spec.name, "': uniform bound must be finite and >= 0, got ",
                         spec.bound));
      }
      return ops.FillRandom(key, RandomDistribution::kUniform, -spec.bound, 2.0 * spec.bound,
                            value);
    case ParamInit::kNormal:
      if (!(spec.bound >= 0.0) || !std::isfinite(spec.bound)) {
        return absl::InvalidArgumentError(
            absl::StrCat("parameter '", spec.name,
                         "': normal standard deviation must be finite and >= 0, got ", spec.bound));
      }
      return ops.FillRandom(key, RandomDistribution::kNormal, spec.bound, 0.0, value);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("parameter '", spec.name, "' has an unknown init kind"));
}

}  // namespace gpipe

#include "layers/parameter_init.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "runtime/core/rng.h"

namespace gpipe {

absl::Status InitializeParameter(const ParamSpec& spec, uint64_t seed, int layer_index,
                                 int param_index, Tensor& value) {
  if (!value.defined() || value.dtype() != DType::kF32 || value.shape() != spec.shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        "parameter '", spec.name, "' (layer ", layer_index, ", parameter ", param_index,
        ") must be an f32 tensor of shape ", spec.shape.ToString(), ", got ", value.DebugString()));
  }
  if (!value.allocator().host_accessible()) {
    return absl::UnimplementedError(absl::StrCat(
        "parameter '", spec.name, "': initialize it in host memory and copy it to the device"));
  }
  float* out = value.f32();
  const int64_t n = value.num_elements();
  switch (spec.init) {
    case ParamInit::kZeros:
      for (int64_t i = 0; i < n; ++i) out[i] = 0.0f;
      return absl::OkStatus();
    case ParamInit::kOnes:
      for (int64_t i = 0; i < n; ++i) out[i] = 1.0f;
      return absl::OkStatus();
    case ParamInit::kUniform: {
      if (!(spec.bound >= 0.0) || !std::isfinite(spec.bound)) {
        return absl::InvalidArgumentError(
            absl::StrCat("parameter '", spec.name, "': uniform bound must be finite and >= 0, got ",
                         spec.bound));
      }
      RandomStream stream(seed, {kInitStreamTag, static_cast<uint64_t>(layer_index),
                                 static_cast<uint64_t>(param_index)});
      const double width = 2.0 * spec.bound;
      for (int64_t i = 0; i < n; ++i) {
        out[i] = static_cast<float>(-spec.bound + width * stream.NextUniform());
      }
      return absl::OkStatus();
    }
    case ParamInit::kNormal: {
      if (!(spec.bound >= 0.0) || !std::isfinite(spec.bound)) {
        return absl::InvalidArgumentError(
            absl::StrCat("parameter '", spec.name,
                         "': normal standard deviation must be finite and >= 0, got ", spec.bound));
      }
      RandomStream stream(seed, {kInitStreamTag, static_cast<uint64_t>(layer_index),
                                 static_cast<uint64_t>(param_index)});
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(spec.bound * stream.NextNormal());
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("parameter '", spec.name, "' has an unknown init kind"));
}

}  // namespace gpipe

#include "tests/layers/test_tensors.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "runtime/core/check.h"
#include "runtime/core/rng.h"

namespace gpipe::testing {
namespace {

Tensor MustEmpty(Device& device, const Shape& shape, DType dtype, MemoryKind kind) {
  absl::StatusOr<Tensor> tensor = Tensor::Empty(device, shape, dtype, kind);
  GPIPE_CHECK(tensor.ok()) << tensor.status().ToString();
  return *std::move(tensor);
}

}  // namespace

Tensor F32Tensor(Device& device, const Shape& shape, const std::vector<float>& values,
                 MemoryKind kind) {
  GPIPE_CHECK(shape.num_elements() == static_cast<int64_t>(values.size()))
      << shape.ToString() << " vs " << values.size() << " values";
  Tensor tensor = MustEmpty(device, shape, DType::kF32, kind);
  std::copy(values.begin(), values.end(), tensor.f32());
  return tensor;
}

Tensor I64Tensor(Device& device, const Shape& shape, const std::vector<int64_t>& values,
                 MemoryKind kind) {
  GPIPE_CHECK(shape.num_elements() == static_cast<int64_t>(values.size()))
      << shape.ToString() << " vs " << values.size() << " values";
  Tensor tensor = MustEmpty(device, shape, DType::kI64, kind);
  std::copy(values.begin(), values.end(), tensor.data<int64_t>());
  return tensor;
}

Tensor UniformTensor(Device& device, const Shape& shape, uint64_t seed, float lo, float hi,
                     float min_abs, MemoryKind kind) {
  Tensor tensor = MustEmpty(device, shape, DType::kF32, kind);
  RandomStream stream(seed, {0x7465737473ull /* "tests" */});
  float* out = tensor.f32();
  for (int64_t i = 0; i < tensor.num_elements(); ++i) {
    float v = lo + (hi - lo) * stream.NextUniform();
    if (std::fabs(v) < min_abs) v = v < 0.0f ? -min_abs : min_abs;
    out[i] = v;
  }
  return tensor;
}

std::vector<Tensor> UniformParams(const Layer& layer, Device& device, uint64_t seed, float lo,
                                  float hi) {
  std::vector<Tensor> params;
  for (const ParamSpec& spec : layer.parameter_specs()) {
    params.push_back(UniformTensor(device, spec.shape, seed + params.size() * 7919, lo, hi, 0.0f,
                                   MemoryKind::kParameter));
  }
  return params;
}

std::vector<Tensor> ZeroGrads(const Layer& layer, Device& device) {
  std::vector<Tensor> grads;
  for (const ParamSpec& spec : layer.parameter_specs()) {
    absl::StatusOr<Tensor> grad =
        Tensor::Zeros(device, spec.shape, DType::kF32, MemoryKind::kGradient);
    GPIPE_CHECK(grad.ok()) << grad.status().ToString();
    grads.push_back(*std::move(grad));
  }
  return grads;
}

std::vector<float> Values(const Tensor& tensor) {
  const std::span<const float> span = tensor.f32_span();
  return std::vector<float>(span.begin(), span.end());
}

}  // namespace gpipe::testing

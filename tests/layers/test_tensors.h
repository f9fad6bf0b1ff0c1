// Test helpers for tests/layers: tensors from literal values or from a seeded uniform
// distribution (keyed like nccl-tests: the same seed always gives the same values), and reading
// a tensor back as a vector. Tensors are allocated as MemoryKind::kData unless told otherwise,
// so tests can tell them apart from what layers allocate.
#ifndef GPIPE_TESTS_LAYERS_TEST_TENSORS_H_
#define GPIPE_TESTS_LAYERS_TEST_TENSORS_H_

#include <cstdint>
#include <vector>

#include "layers/layer.h"
#include "runtime/core/tensor.h"
#include "runtime/device/device.h"

namespace gpipe::testing {

// An f32 tensor holding `values` (row-major); CHECK-fails if the count does not match `shape`.
Tensor F32Tensor(Device& device, const Shape& shape, const std::vector<float>& values,
                 MemoryKind kind = MemoryKind::kData);
// An i64 tensor holding `values`.
Tensor I64Tensor(Device& device, const Shape& shape, const std::vector<int64_t>& values,
                 MemoryKind kind = MemoryKind::kData);
// Values drawn from U(lo, hi), keyed by `seed`. With min_abs > 0, values with |v| < min_abs are
// pushed out to +-min_abs (keeps inputs away from a kink such as relu's at 0).
Tensor UniformTensor(Device& device, const Shape& shape, uint64_t seed, float lo, float hi,
                     float min_abs = 0.0f, MemoryKind kind = MemoryKind::kData);
// One tensor per parameter of `layer`, drawn from U(lo, hi), as MemoryKind::kParameter.
std::vector<Tensor> UniformParams(const Layer& layer, Device& device, uint64_t seed,
                                  float lo = -1.0f, float hi = 1.0f);
// Zero-filled gradients shaped like `layer`'s parameters, as MemoryKind::kGradient.
std::vector<Tensor> ZeroGrads(const Layer& layer, Device& device);

std::vector<float> Values(const Tensor& tensor);

}  // namespace gpipe::testing

#endif  // GPIPE_TESTS_LAYERS_TEST_TENSORS_H_

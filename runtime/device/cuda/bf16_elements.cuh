// bf16 elements in CUDA kernels, with the CPU backend's bits (runtime/core/bf16.h): an f32 rounds
// to the nearest even bf16 (NaN kept quiet), a bf16 widens exactly. Elements stay uint16_t (the
// tensors' bf16 storage); F32OrBf16In/Out let one kernel read or write either dtype.
#ifndef GPIPE_RUNTIME_DEVICE_CUDA_BF16_ELEMENTS_CUH_
#define GPIPE_RUNTIME_DEVICE_CUDA_BF16_ELEMENTS_CUH_

#include <cstdint>

#include "runtime/core/tensor.h"

namespace gpipe::cuda {

// The upper half of an f32's bits, rounded to nearest even.
__host__ __device__ inline uint16_t ToBf16(uint32_t bits) {
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

__device__ inline float FromBf16(uint16_t bits) {
  return __uint_as_float(static_cast<uint32_t>(bits) << 16);
}

// Kernel operands that are an f32 or a bf16 tensor's device storage (the dtype is the same for
// the whole launch, so the branch does not diverge). Built on the host from a tensor the op has
// checked.
struct F32OrBf16In {
  const void* data = nullptr;
  bool bf16 = false;

  explicit F32OrBf16In(const Tensor& tensor)
      : data(tensor.raw_data()), bf16(tensor.dtype() == DType::kBF16) {}
  __device__ float operator[](int64_t i) const {
    return bf16 ? FromBf16(static_cast<const uint16_t*>(data)[i])
                : static_cast<const float*>(data)[i];
  }
};

struct F32OrBf16Out {
  void* data = nullptr;
  bool bf16 = false;

  explicit F32OrBf16Out(Tensor& tensor)
      : data(tensor.raw_data()), bf16(tensor.dtype() == DType::kBF16) {}
  __device__ void Store(int64_t i, float value) const {
    if (bf16) {
      static_cast<uint16_t*>(data)[i] = ToBf16(__float_as_uint(value));
    } else {
      static_cast<float*>(data)[i] = value;
    }
  }
};

}  // namespace gpipe::cuda

#endif  // GPIPE_RUNTIME_DEVICE_CUDA_BF16_ELEMENTS_CUH_

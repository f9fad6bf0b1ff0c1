// Element types a tensor can hold. fp32 carries activations, parameters and gradients;
// int64 carries class ids and token ids.
#ifndef GPIPE_RUNTIME_CORE_DTYPE_H_
#define GPIPE_RUNTIME_CORE_DTYPE_H_

#include <cstdint>

namespace gpipe {

enum class DType : int32_t { kF32 = 1, kI64 = 2 };

constexpr int64_t SizeOf(DType dtype) { return dtype == DType::kF32 ? 4 : 8; }

constexpr const char* DTypeName(DType dtype) { return dtype == DType::kF32 ? "f32" : "i64"; }

template <typename T>
constexpr DType DTypeOf();
template <>
constexpr DType DTypeOf<float>() {
  return DType::kF32;
}
template <>
constexpr DType DTypeOf<int64_t>() {
  return DType::kI64;
}

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CORE_DTYPE_H_

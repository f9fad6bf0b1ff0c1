// Element types a tensor can hold. fp32 carries activations, parameters and gradients; int64
// carries class ids and token ids; fp64 carries device-side loss sums; bf16 is the storage type
// of mixed precision (converted with Ops casts).
#ifndef GPIPE_RUNTIME_CORE_DTYPE_H_
#define GPIPE_RUNTIME_CORE_DTYPE_H_

#include <cstdint>

namespace gpipe {

// The numbers are wire values (transfer headers): never renumber.
enum class DType : int32_t { kF32 = 1, kI64 = 2, kF64 = 3, kBF16 = 4 };

constexpr int64_t SizeOf(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kI64:
    case DType::kF64:
      return 8;
    case DType::kBF16:
      return 2;
  }
  return 0;
}

constexpr const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kI64:
      return "i64";
    case DType::kF64:
      return "f64";
    case DType::kBF16:
      return "bf16";
  }
  return "?";
}

// Whether `value` names a DType (for values read from the wire or a file).
constexpr bool IsValidDType(int32_t value) { return value >= 1 && value <= 4; }

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
template <>
constexpr DType DTypeOf<double>() {
  return DType::kF64;
}

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CORE_DTYPE_H_

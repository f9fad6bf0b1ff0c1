// bf16 <-> f32 on the host: round to nearest even (NaNs stay quiet NaNs), and the exact widening.
// The one definition the CPU backend and the tests share. Pure; thread-safe.
#ifndef GPIPE_RUNTIME_CORE_BF16_H_
#define GPIPE_RUNTIME_CORE_BF16_H_

#include <cstdint>
#include <cstring>

namespace gpipe {

inline uint16_t ToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

inline float FromBf16(uint16_t value) {
  const uint32_t bits = static_cast<uint32_t>(value) << 16;
  float out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

// `value` rounded to the nearest bf16, as an f32.
inline float RoundToBf16(float value) { return FromBf16(ToBf16(value)); }

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CORE_BF16_H_

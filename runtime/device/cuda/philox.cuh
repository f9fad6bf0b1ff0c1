// Philox-4x32-10 on the GPU, word for word the generator of runtime/core/rng.{h,cc}: word w of
// the stream (seed, key) is output w % 4 of the block with counter (w / 4, MixKey(key)) under
// the 64-bit key `seed`. Kernels draw element i's words directly, so the bits equal the CPU's
// RandomStream(seed, key).Seek(first_word) drawing in order.
#ifndef GPIPE_RUNTIME_DEVICE_CUDA_PHILOX_CUH_
#define GPIPE_RUNTIME_DEVICE_CUDA_PHILOX_CUH_

#include <cstdint>

namespace gpipe::cuda {

// A stream as the kernels need it: the key words and the mixed stream key (MixKey on the host).
struct PhiloxStream {
  uint32_t key0 = 0, key1 = 0;  // seed, low and high halves
  uint64_t stream = 0;          // MixKey(key words)
};

__device__ inline uint32_t PhiloxWord(const PhiloxStream& s, uint64_t word) {
  const uint64_t block = word / 4;
  uint32_t c0 = static_cast<uint32_t>(block), c1 = static_cast<uint32_t>(block >> 32);
  uint32_t c2 = static_cast<uint32_t>(s.stream), c3 = static_cast<uint32_t>(s.stream >> 32);
  uint32_t k0 = s.key0, k1 = s.key1;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  switch (word % 4) {
    case 0:
      return c0;
    case 1:
      return c1;
    case 2:
      return c2;
    default:
      return c3;
  }
}

// RandomStream::NextUniform: 24 random bits as a float in [0, 1).
__device__ inline float PhiloxUniform(const PhiloxStream& s, uint64_t word) {
  return static_cast<float>(PhiloxWord(s, word) >> 8) * (1.0f / 16777216.0f);
}

// RandomStream::NextNormal from words `word` and `word + 1` (Box-Muller in double).
__device__ inline double PhiloxNormal(const PhiloxStream& s, uint64_t word) {
  const double u1 = (static_cast<double>(PhiloxWord(s, word) >> 8) + 1.0) / 16777216.0;
  const double u2 = static_cast<double>(PhiloxWord(s, word + 1) >> 8) / 16777216.0;
  return sqrt(-2.0 * log(u1)) * cos(2.0 * 3.14159265358979323846 * u2);
}

}  // namespace gpipe::cuda

#endif  // GPIPE_RUNTIME_DEVICE_CUDA_PHILOX_CUH_

#include "runtime/core/rng.h"

#include <cmath>
#include <numbers>

namespace gpipe {
namespace {

constexpr uint32_t kMul0 = 0xD2511F53u;
constexpr uint32_t kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u;
constexpr uint32_t kWeyl1 = 0xBB67AE85u;

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

std::array<uint32_t, 4> Philox4x32(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * c[0];
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * c[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
    k[0] += kWeyl0;
    k[1] += kWeyl1;
  }
  return c;
}

uint64_t MixKey(std::initializer_list<uint64_t> words) {
  uint64_t h = 0x6A09E667F3BCC909ull;
  for (uint64_t w : words) h = SplitMix64(h ^ SplitMix64(w));
  return h;
}

RandomStream::RandomStream(uint64_t seed, std::initializer_list<uint64_t> key)
    : key_{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}, stream_(MixKey(key)) {}

uint32_t RandomStream::NextU32() {
  if (used_ == 4) {
    buffer_ = Philox4x32({static_cast<uint32_t>(block_), static_cast<uint32_t>(block_ >> 32),
                          static_cast<uint32_t>(stream_), static_cast<uint32_t>(stream_ >> 32)},
                         key_);
    ++block_;
    used_ = 0;
  }
  return buffer_[used_++];
}

void RandomStream::Seek(uint64_t word) {
  block_ = word / 4;
  used_ = 4;
  const int skip = static_cast<int>(word % 4);
  for (int i = 0; i < skip; ++i) NextU32();
}

float RandomStream::NextUniform() {
  return static_cast<float>(NextU32() >> 8) * (1.0f / 16777216.0f);
}

double RandomStream::NextNormal() {
  // u1 in (0, 1] so the log is finite.
  const double u1 = (static_cast<double>(NextU32() >> 8) + 1.0) / 16777216.0;
  const double u2 = static_cast<double>(NextU32() >> 8) / 16777216.0;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace gpipe

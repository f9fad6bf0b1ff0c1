// Counter-based random numbers (Philox-4x32-10, Salmon et al. 2011).
//
// A stream is a pure function of (seed, stream key, position): the same key always yields the
// same numbers, on any rank, in any order of creation. Dropout keys its stream by
// (seed, step, layer) and seeks to the sample's position, so a recomputed forward replays the
// same mask whatever the micro-batch split; parameter
// initialization keys by (seed, layer, parameter), so weights do not depend on the partition.
#ifndef GPIPE_RUNTIME_CORE_RNG_H_
#define GPIPE_RUNTIME_CORE_RNG_H_

#include <array>
#include <cstdint>
#include <initializer_list>

namespace gpipe {

// One Philox-4x32-10 block: 4 random 32-bit words from a 128-bit counter and a 64-bit key.
std::array<uint32_t, 4> Philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

// Mixes a list of 64-bit words into one 64-bit stream key (SplitMix64 chaining).
uint64_t MixKey(std::initializer_list<uint64_t> words);

class RandomStream {
 public:
  // The stream of `seed` for the given key words, e.g. {step, micro_batch, layer}.
  RandomStream(uint64_t seed, std::initializer_list<uint64_t> key);

  uint32_t NextU32();
  // Moves to the `word`-th 32-bit word of the stream (0 = its start), so a consumer can draw
  // element i's numbers without drawing elements 0..i-1.
  void Seek(uint64_t word);
  // Uniform in [0, 1) with 24 random bits (exactly representable as float).
  float NextUniform();
  // Standard normal (Box-Muller on two 24-bit uniforms, so |x| < 5.8), as a double.
  double NextNormal();

 private:
  std::array<uint32_t, 2> key_;
  uint64_t stream_;
  uint64_t block_ = 0;
  std::array<uint32_t, 4> buffer_{};
  int used_ = 4;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CORE_RNG_H_

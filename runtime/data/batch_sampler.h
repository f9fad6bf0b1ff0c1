// BatchSampler: which samples each training step uses, a deterministic function of the plan's
// batch, shuffle flag and seed, so every rank that reads data computes the same indices.
#ifndef GPIPE_RUNTIME_DATA_BATCH_SAMPLER_H_
#define GPIPE_RUNTIME_DATA_BATCH_SAMPLER_H_

#include <cstdint>
#include <memory>
#include <vector>

namespace gpipe {

// Step s's sample indices: without shuffle, [s*B, (s+1)*B) modulo N in order; with shuffle,
// epoch e = floor(s*B / N) visits a permutation drawn from (seed, e), continuing across
// epoch boundaries. The most recent epoch's permutation is cached (shared by copies of the
// sampler, which compute the same permutations); IndicesForStep is thread-safe.
class BatchSampler {
 public:
  // Requires dataset_size >= 1 and global_batch >= 1 (the plan checker guarantees both).
  BatchSampler(int64_t dataset_size, int64_t global_batch, bool shuffle, uint64_t seed);
  // Requires step >= 0.
  std::vector<int64_t> IndicesForStep(int64_t step) const;

  // The order in which epoch `epoch` visits the samples (the identity without shuffle).
  std::vector<int64_t> EpochPermutation(int64_t epoch) const;

 private:
  struct PermutationCache;

  int64_t dataset_size_;
  int64_t global_batch_;
  bool shuffle_;
  uint64_t seed_;
  std::shared_ptr<PermutationCache> cache_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DATA_BATCH_SAMPLER_H_

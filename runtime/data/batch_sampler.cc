#include "runtime/data/batch_sampler.h"

#include <limits>
#include <numeric>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "runtime/core/check.h"
#include "runtime/core/rng.h"

namespace gpipe {
namespace {

constexpr uint64_t kShuffleTag = 0x53485546464C4531ull;  // "SHUFFLE1"

// Uniform in [0, bound) without modulo bias (rejection on 64-bit draws).
uint64_t UniformBelow(RandomStream& stream, uint64_t bound) {
  const uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
  while (true) {
    const uint64_t high = stream.NextU32();
    const uint64_t r = (high << 32) | stream.NextU32();
    if (r >= threshold) return r % bound;
  }
}

// Fisher-Yates shuffle of 0..n-1 drawn from the stream of (seed, epoch).
std::vector<int64_t> ShuffledPermutation(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), int64_t{0});
  RandomStream stream(seed, {kShuffleTag, static_cast<uint64_t>(epoch)});
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(UniformBelow(stream, static_cast<uint64_t>(i + 1)));
    std::swap(order[i], order[j]);
  }
  return order;
}

}  // namespace

struct BatchSampler::PermutationCache {
  absl::Mutex mu;
  int64_t epoch ABSL_GUARDED_BY(mu) = -1;
  std::vector<int64_t> order ABSL_GUARDED_BY(mu);
};

BatchSampler::BatchSampler(int64_t dataset_size, int64_t global_batch, bool shuffle, uint64_t seed)
    : dataset_size_(dataset_size),
      global_batch_(global_batch),
      shuffle_(shuffle),
      seed_(seed),
      cache_(std::make_shared<PermutationCache>()) {
  GPIPE_CHECK(dataset_size >= 1) << "BatchSampler needs a non-empty data set, got " << dataset_size;
  GPIPE_CHECK(global_batch >= 1) << "BatchSampler needs global_batch >= 1, got " << global_batch;
}

std::vector<int64_t> BatchSampler::EpochPermutation(int64_t epoch) const {
  GPIPE_CHECK(epoch >= 0) << epoch;
  if (!shuffle_) {
    std::vector<int64_t> order(dataset_size_);
    std::iota(order.begin(), order.end(), int64_t{0});
    return order;
  }
  return ShuffledPermutation(dataset_size_, seed_, epoch);
}

std::vector<int64_t> BatchSampler::IndicesForStep(int64_t step) const {
  GPIPE_CHECK(step >= 0) << step;
  GPIPE_CHECK(step <= std::numeric_limits<int64_t>::max() / global_batch_ - 1)
      << "step " << step << " overflows the sample position";
  std::vector<int64_t> indices(global_batch_);
  const int64_t first = step * global_batch_;
  if (!shuffle_) {
    for (int64_t j = 0; j < global_batch_; ++j) indices[j] = (first + j) % dataset_size_;
    return indices;
  }
  absl::MutexLock lock(&cache_->mu);
  for (int64_t j = 0; j < global_batch_; ++j) {
    const int64_t position = first + j;
    const int64_t epoch = position / dataset_size_;
    if (cache_->epoch != epoch) {
      cache_->order = ShuffledPermutation(dataset_size_, seed_, epoch);
      cache_->epoch = epoch;
    }
    indices[j] = cache_->order[position % dataset_size_];
  }
  return indices;
}

}  // namespace gpipe

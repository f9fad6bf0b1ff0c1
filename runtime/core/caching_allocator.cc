#include "runtime/core/caching_allocator.h"

#include <utility>

namespace gpipe {
namespace {
// The Allocator contract's alignment; sizes are rounded to it so that near-equal requests share
// cached blocks.
constexpr size_t kAlignment = 64;
}  // namespace

size_t CachingAllocator::BucketSize(int64_t bytes) {
  const size_t rounded = ((static_cast<size_t>(bytes) + kAlignment - 1) / kAlignment) * kAlignment;
  return rounded == 0 ? kAlignment : rounded;
}

int64_t CachingAllocator::cached_bytes() const {
  absl::MutexLock lock(&mu_);
  return cached_bytes_;
}

void CachingAllocator::ReleaseCached() {
  absl::flat_hash_map<size_t, std::vector<void*>> blocks;
  {
    absl::MutexLock lock(&mu_);
    blocks.swap(cached_);
    cached_bytes_ = 0;
  }
  // Outside the lock: giving a block back may wait (cudaFreeHost waits for the GPU).
  for (auto& [size, pointers] : blocks) {
    for (void* block : pointers) source_.DeleteBlock(block, size);
  }
}

absl::StatusOr<void*> CachingAllocator::Allocate(int64_t bytes) {
  const size_t size = BucketSize(bytes);
  {
    absl::MutexLock lock(&mu_);
    auto it = cached_.find(size);
    if (it != cached_.end() && !it->second.empty()) {
      void* block = it->second.back();
      it->second.pop_back();
      cached_bytes_ -= static_cast<int64_t>(size);
      return block;
    }
  }
  absl::StatusOr<void*> block = source_.NewBlock(size);
  if (block.status().code() == absl::StatusCode::kResourceExhausted) {
    ReleaseCached();  // blocks of other sizes may make room
    block = source_.NewBlock(size);
  }
  return block;
}

void CachingAllocator::Free(void* block, int64_t bytes) {
  const size_t size = BucketSize(bytes);
  absl::MutexLock lock(&mu_);
  cached_[size].push_back(block);
  cached_bytes_ += static_cast<int64_t>(size);
}

}  // namespace gpipe

// CachingAllocator: the size-bucket cache under the host allocators (HostAllocator,
// PinnedHostAllocator). Block sizes are rounded up to 64 bytes; a freed block is kept by its
// rounded size and handed out again for a request of that size, because a training loop
// allocates the same shapes every micro-batch and fresh blocks (new pages, pinning) cost more
// than a small op computes. Raw blocks come from a BlockSource. It counts cached bytes only:
// the allocator on top of it keeps the live-byte accounting. Thread-safe.
#ifndef GPIPE_RUNTIME_CORE_CACHING_ALLOCATOR_H_
#define GPIPE_RUNTIME_CORE_CACHING_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace gpipe {

// Where a CachingAllocator's blocks come from and go back to.
class BlockSource {
 public:
  virtual ~BlockSource() = default;
  // A new block of `bytes` (a positive multiple of 64), 64-byte aligned. RESOURCE_EXHAUSTED when
  // memory ran out: the cache is then released and the call made once more. Other errors are
  // final.
  virtual absl::StatusOr<void*> NewBlock(size_t bytes) = 0;
  // Gives back a block NewBlock returned (`bytes` as asked for). May block (it runs unlocked).
  virtual void DeleteBlock(void* block, size_t bytes) = 0;
};

class CachingAllocator {
 public:
  // `source` must outlive the allocator.
  explicit CachingAllocator(BlockSource& source) : source_(source) {}
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;
  ~CachingAllocator() { ReleaseCached(); }

  // `bytes` (>= 0) rounded up to the 64-byte bucket it is cached in (at least 64).
  static size_t BucketSize(int64_t bytes);

  // A block of at least `bytes`: a cached one of its bucket, else a new one from the source.
  absl::StatusOr<void*> Allocate(int64_t bytes);
  // Caches `block`, which Allocate(bytes) returned, for reuse.
  void Free(void* block, int64_t bytes);

  // Bytes held in freed blocks awaiting reuse.
  int64_t cached_bytes() const;
  // Gives every cached block back to the source.
  void ReleaseCached();

 private:
  BlockSource& source_;
  mutable absl::Mutex mu_;
  // Free blocks by their bucket size.
  absl::flat_hash_map<size_t, std::vector<void*>> cached_ ABSL_GUARDED_BY(mu_);
  int64_t cached_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CORE_CACHING_ALLOCATOR_H_

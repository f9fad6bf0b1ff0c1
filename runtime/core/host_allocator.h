// HostAllocator: ordinary host memory (64-byte aligned, from the C++ heap) with its own byte
// accounting: staging buffers through which data reaches a device, and the CPU device's memory.
// Freed blocks are cached by size and handed out again (CachingAllocator): fresh pages from the
// OS (the heap maps large blocks anew each time) cost more in page faults than a small op
// computes. Cached blocks are not in use: the tracker and the limit count live bytes only;
// ReleaseCached() returns them to the heap.
// Thread-safe.
#ifndef GPIPE_RUNTIME_CORE_HOST_ALLOCATOR_H_
#define GPIPE_RUNTIME_CORE_HOST_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>

#include "runtime/core/allocator.h"
#include "runtime/core/caching_allocator.h"
#include "runtime/core/memory_tracker.h"

namespace gpipe {

class HostAllocator final : public Allocator, private BlockSource {
 public:
  // `limit_bytes` > 0: allocations beyond it in total fail with RESOURCE_EXHAUSTED. `label`
  // ("cpu", "staging") starts error messages.
  explicit HostAllocator(const char* label, int64_t limit_bytes = 0)
      : label_(label), limit_bytes_(limit_bytes) {}
  HostAllocator(const HostAllocator&) = delete;
  HostAllocator& operator=(const HostAllocator&) = delete;
  ~HostAllocator() override;

  absl::StatusOr<void*> Allocate(int64_t bytes, MemoryKind kind) override;
  void Free(void* ptr, int64_t bytes, MemoryKind kind) override;
  void Recount(int64_t bytes, MemoryKind from, MemoryKind to) override;
  bool host_accessible() const override { return true; }

  MemoryTracker& memory() { return memory_; }
  // Bytes held in freed blocks awaiting reuse.
  int64_t cached_bytes() const { return cache_.cached_bytes(); }
  // Returns every cached block to the heap.
  void ReleaseCached() { cache_.ReleaseCached(); }

 private:
  // BlockSource: the C++ heap.
  absl::StatusOr<void*> NewBlock(size_t bytes) override;
  void DeleteBlock(void* block, size_t bytes) override;

  const char* label_;
  int64_t limit_bytes_;
  MemoryTracker memory_;
  CachingAllocator cache_{*this};
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CORE_HOST_ALLOCATOR_H_

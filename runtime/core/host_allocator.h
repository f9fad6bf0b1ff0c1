// HostAllocator: ordinary host memory (64-byte aligned, from the C++ heap) with its own byte
// accounting: staging buffers through which data reaches a device, and the CPU device's memory.
// Thread-safe.
#ifndef GPIPE_RUNTIME_CORE_HOST_ALLOCATOR_H_
#define GPIPE_RUNTIME_CORE_HOST_ALLOCATOR_H_

#include <cstdint>

#include "runtime/core/allocator.h"
#include "runtime/core/memory_tracker.h"

namespace gpipe {

class HostAllocator final : public Allocator {
 public:
  // `limit_bytes` > 0: allocations beyond it in total fail with RESOURCE_EXHAUSTED. `label`
  // ("cpu", "staging") starts error messages.
  explicit HostAllocator(const char* label, int64_t limit_bytes = 0)
      : label_(label), limit_bytes_(limit_bytes) {}
  HostAllocator(const HostAllocator&) = delete;
  HostAllocator& operator=(const HostAllocator&) = delete;

  absl::StatusOr<void*> Allocate(int64_t bytes, MemoryKind kind) override;
  void Free(void* ptr, int64_t bytes, MemoryKind kind) override;
  void Recount(int64_t bytes, MemoryKind from, MemoryKind to) override;
  bool host_accessible() const override { return true; }

  MemoryTracker& memory() { return memory_; }

 private:
  const char* label_;
  int64_t limit_bytes_;
  MemoryTracker memory_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CORE_HOST_ALLOCATOR_H_

// Allocator: where tensor storage comes from. A Device implements it; every allocation is
// counted in the device's MemoryTracker until the last Tensor sharing it is destroyed.
#ifndef GPIPE_RUNTIME_CORE_ALLOCATOR_H_
#define GPIPE_RUNTIME_CORE_ALLOCATOR_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "runtime/core/memory_tracker.h"

namespace gpipe {

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Returns `bytes` of storage aligned to 64 bytes, contents unspecified; counted under `kind`.
  // Fails with RESOURCE_EXHAUSTED when the device has no room.
  virtual absl::StatusOr<void*> Allocate(int64_t bytes, MemoryKind kind) = 0;
  // Returns storage from Allocate with the same bytes and kind.
  virtual void Free(void* ptr, int64_t bytes, MemoryKind kind) = 0;
  // Storage of `bytes` counted under `from` is counted under `to` from now on (a tensor changed
  // role, e.g. a layer's output became a boundary tensor awaiting its send).
  virtual void Recount(int64_t bytes, MemoryKind from, MemoryKind to) = 0;
  // Whether the storage is ordinary host memory (readable by the CPU through its pointer).
  virtual bool host_accessible() const = 0;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CORE_ALLOCATOR_H_

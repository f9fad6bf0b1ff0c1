// PinnedHostAllocator: page-locked host memory (cudaHostAlloc) for a GPU's host staging
// buffers, which the DMA engines read directly, so host-to-device copies from it need no
// driver-side staging and may run on a copy stream. Pinning pages is slow (it maps and locks
// them), and a training loop gathers the same shapes every micro-batch, so freed blocks are
// cached by size and handed out again (CachingAllocator); ReleaseCached() (and the destructor)
// give them back.
// Live bytes are counted by kind in its own MemoryTracker, apart from the GPU's memory; cached
// blocks are not counted. Readable and writable by the CPU (host_accessible()).
//
// A block may be freed only once no queued copy reads it; CudaDevice::CopyFromHost returns
// after its copy is done, so staging tensors can be dropped or reused right after it.
// Thread-safe.
#ifndef GPIPE_RUNTIME_DEVICE_CUDA_PINNED_HOST_ALLOCATOR_H_
#define GPIPE_RUNTIME_DEVICE_CUDA_PINNED_HOST_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "runtime/core/allocator.h"
#include "runtime/core/caching_allocator.h"
#include "runtime/core/logger.h"
#include "runtime/core/memory_tracker.h"

namespace gpipe {

class PinnedHostAllocator final : public Allocator, private BlockSource {
 public:
  // `label` ("cuda:0 staging") starts error messages; `logger` must outlive the allocator.
  PinnedHostAllocator(std::string label, const Logger& logger)
      : label_(std::move(label)), logger_(logger) {}
  PinnedHostAllocator(const PinnedHostAllocator&) = delete;
  PinnedHostAllocator& operator=(const PinnedHostAllocator&) = delete;
  ~PinnedHostAllocator() override;

  absl::StatusOr<void*> Allocate(int64_t bytes, MemoryKind kind) override;
  void Free(void* ptr, int64_t bytes, MemoryKind kind) override;
  void Recount(int64_t bytes, MemoryKind from, MemoryKind to) override;
  bool host_accessible() const override { return true; }

  MemoryTracker& memory() { return memory_; }
  // Bytes held in freed blocks awaiting reuse.
  int64_t cached_bytes() const { return cache_.cached_bytes(); }
  // Unpins and frees every cached block.
  void ReleaseCached() { cache_.ReleaseCached(); }

 private:
  // BlockSource: cudaHostAlloc and cudaFreeHost.
  absl::StatusOr<void*> NewBlock(size_t bytes) override;
  void DeleteBlock(void* block, size_t bytes) override;

  const std::string label_;
  const Logger& logger_;
  MemoryTracker memory_;
  CachingAllocator cache_{*this};
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CUDA_PINNED_HOST_ALLOCATOR_H_

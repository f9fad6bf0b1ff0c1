#include "runtime/device/cuda/pinned_host_allocator.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "runtime/device/cuda/cuda_status.h"

namespace gpipe {

PinnedHostAllocator::~PinnedHostAllocator() { ReleaseCached(); }

absl::StatusOr<void*> PinnedHostAllocator::NewBlock(size_t bytes) {
  // cudaHostAlloc gives whole pages: more than the Allocator contract's 64-byte alignment.
  void* block = nullptr;
  if (const cudaError_t code = cudaHostAlloc(&block, bytes, cudaHostAllocDefault);
      code != cudaSuccess) {
    cudaGetLastError();  // reported by the caller; not an error of queued work
    // RESOURCE_EXHAUSTED for cudaErrorMemoryAllocation: the cache is released and it is retried.
    return CudaStatus(code, "cudaHostAlloc");
  }
  return block;
}

void PinnedHostAllocator::DeleteBlock(void* block, size_t bytes) {
  if (const cudaError_t code = cudaFreeHost(block); code != cudaSuccess) {
    cudaGetLastError();  // logged here; not an error of queued work
    logger_.Error(absl::StrCat(label_, ": releasing a cached block of ", bytes,
                               " bytes failed: ", CudaStatus(code, "cudaFreeHost").message()));
  }
}

absl::StatusOr<void*> PinnedHostAllocator::Allocate(int64_t bytes, MemoryKind kind) {
  if (bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(label_, ": allocating a negative size (", bytes, " bytes)"));
  }
  absl::StatusOr<void*> ptr = cache_.Allocate(bytes);
  if (!ptr.ok()) {
    return absl::Status(ptr.status().code(),
                        absl::StrCat(label_, ": allocating ", bytes, " bytes (",
                                     MemoryKindName(kind), ") of pinned host memory (",
                                     memory_.current(), " in use): ", ptr.status().message()));
  }
  memory_.Allocated(kind, bytes);
  return ptr;
}

void PinnedHostAllocator::Free(void* ptr, int64_t bytes, MemoryKind kind) {
  memory_.Freed(kind, bytes);
  cache_.Free(ptr, bytes);
}

void PinnedHostAllocator::Recount(int64_t bytes, MemoryKind from, MemoryKind to) {
  memory_.Moved(from, to, bytes);
}

}  // namespace gpipe

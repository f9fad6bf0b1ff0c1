#include "runtime/device/cuda/pinned_host_allocator.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "runtime/device/cuda/cuda_status.h"

namespace gpipe {
namespace {
// The Allocator contract's alignment (cudaHostAlloc gives whole pages); sizes are rounded to
// it so that near-equal requests share cached blocks.
constexpr size_t kAlignment = 64;

size_t Rounded(int64_t bytes) {
  const size_t rounded = ((static_cast<size_t>(bytes) + kAlignment - 1) / kAlignment) * kAlignment;
  return rounded == 0 ? kAlignment : rounded;
}

}  // namespace

PinnedHostAllocator::~PinnedHostAllocator() { ReleaseCached(); }

int64_t PinnedHostAllocator::cached_bytes() const {
  absl::MutexLock lock(&mu_);
  return cached_bytes_;
}

void PinnedHostAllocator::ReleaseCached() {
  absl::flat_hash_map<size_t, std::vector<void*>> blocks;
  {
    absl::MutexLock lock(&mu_);
    blocks.swap(cached_);
    cached_bytes_ = 0;
  }
  // Outside the lock: cudaFreeHost may wait for the GPU.
  for (auto& [size, pointers] : blocks) {
    for (void* block : pointers) {
      if (const cudaError_t code = cudaFreeHost(block); code != cudaSuccess) {
        cudaGetLastError();  // logged here; not an error of queued work
        logger_.Error(absl::StrCat(label_, ": releasing a cached block of ", size,
                                   " bytes failed: ", CudaStatus(code, "cudaFreeHost").message()));
      }
    }
  }
}

absl::StatusOr<void*> PinnedHostAllocator::Allocate(int64_t bytes, MemoryKind kind) {
  if (bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(label_, ": allocating a negative size (", bytes, " bytes)"));
  }
  const size_t rounded = Rounded(bytes);
  {
    absl::MutexLock lock(&mu_);
    auto it = cached_.find(rounded);
    if (it != cached_.end() && !it->second.empty()) {
      void* ptr = it->second.back();
      it->second.pop_back();
      cached_bytes_ -= static_cast<int64_t>(rounded);
      memory_.Allocated(kind, bytes);
      return ptr;
    }
  }
  void* ptr = nullptr;
  cudaError_t code = cudaHostAlloc(&ptr, rounded, cudaHostAllocDefault);
  if (code == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    ReleaseCached();  // blocks of other sizes may make room
    code = cudaHostAlloc(&ptr, rounded, cudaHostAllocDefault);
  }
  if (code != cudaSuccess) {
    cudaGetLastError();  // reported here; not an error of queued work
    const absl::Status status = CudaStatus(code, "cudaHostAlloc");
    return absl::Status(status.code(),
                        absl::StrCat(label_, ": allocating ", bytes, " bytes (",
                                     MemoryKindName(kind), ") of pinned host memory (",
                                     memory_.current(), " in use): ", status.message()));
  }
  memory_.Allocated(kind, bytes);
  return ptr;
}

void PinnedHostAllocator::Free(void* ptr, int64_t bytes, MemoryKind kind) {
  memory_.Freed(kind, bytes);
  const size_t rounded = Rounded(bytes);
  absl::MutexLock lock(&mu_);
  cached_[rounded].push_back(ptr);
  cached_bytes_ += static_cast<int64_t>(rounded);
}

void PinnedHostAllocator::Recount(int64_t bytes, MemoryKind from, MemoryKind to) {
  memory_.Moved(from, to, bytes);
}

}  // namespace gpipe

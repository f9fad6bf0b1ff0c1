#include "runtime/core/host_allocator.h"

#include <new>

#include "absl/strings/str_cat.h"

namespace gpipe {
namespace {
constexpr size_t kAlignment = 64;
}  // namespace

HostAllocator::~HostAllocator() { ReleaseCached(); }

absl::StatusOr<void*> HostAllocator::NewBlock(size_t bytes) {
  void* block = ::operator new(bytes, std::align_val_t(kAlignment), std::nothrow);
  if (block == nullptr) return absl::ResourceExhaustedError("out of memory");
  return block;
}

void HostAllocator::DeleteBlock(void* block, size_t) {
  ::operator delete(block, std::align_val_t(kAlignment));
}

absl::StatusOr<void*> HostAllocator::Allocate(int64_t bytes, MemoryKind kind) {
  if (bytes < 0) return absl::InvalidArgumentError("negative allocation size");
  if (limit_bytes_ > 0 && memory_.current() + bytes > limit_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        label_, ": allocating ", bytes, " bytes (", MemoryKindName(kind), ") exceeds the limit of ",
        limit_bytes_, " bytes (", memory_.current(), " in use)"));
  }
  absl::StatusOr<void*> ptr = cache_.Allocate(bytes);
  if (!ptr.ok()) {
    return absl::ResourceExhaustedError(absl::StrCat(label_, ": out of memory allocating ", bytes,
                                                     " bytes (", MemoryKindName(kind), ")"));
  }
  memory_.Allocated(kind, bytes);
  return ptr;
}

void HostAllocator::Free(void* ptr, int64_t bytes, MemoryKind kind) {
  memory_.Freed(kind, bytes);
  cache_.Free(ptr, bytes);
}

void HostAllocator::Recount(int64_t bytes, MemoryKind from, MemoryKind to) {
  memory_.Moved(from, to, bytes);
}

}  // namespace gpipe

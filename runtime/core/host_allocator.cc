#include "runtime/core/host_allocator.h"

#include <new>

#include "absl/strings/str_cat.h"

namespace gpipe {
namespace {
constexpr size_t kAlignment = 64;
}  // namespace

absl::StatusOr<void*> HostAllocator::Allocate(int64_t bytes, MemoryKind kind) {
  if (bytes < 0) return absl::InvalidArgumentError("negative allocation size");
  if (limit_bytes_ > 0 && memory_.current() + bytes > limit_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        label_, ": allocating ", bytes, " bytes (", MemoryKindName(kind), ") exceeds the limit of ",
        limit_bytes_, " bytes (", memory_.current(), " in use)"));
  }
  const size_t rounded = ((static_cast<size_t>(bytes) + kAlignment - 1) / kAlignment) * kAlignment;
  void* ptr = ::operator new(rounded == 0 ? kAlignment : rounded, std::align_val_t(kAlignment),
                             std::nothrow);
  if (ptr == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(label_, ": out of memory allocating ", bytes,
                                                     " bytes (", MemoryKindName(kind), ")"));
  }
  memory_.Allocated(kind, bytes);
  return ptr;
}

void HostAllocator::Free(void* ptr, int64_t bytes, MemoryKind kind) {
  ::operator delete(ptr, std::align_val_t(kAlignment));
  memory_.Freed(kind, bytes);
}

void HostAllocator::Recount(int64_t bytes, MemoryKind from, MemoryKind to) {
  memory_.Moved(from, to, bytes);
}

}  // namespace gpipe

#include "runtime/core/host_allocator.h"

#include <new>

#include "absl/strings/str_cat.h"

namespace gpipe {
namespace {
constexpr size_t kAlignment = 64;

size_t Rounded(int64_t bytes) {
  const size_t rounded = ((static_cast<size_t>(bytes) + kAlignment - 1) / kAlignment) * kAlignment;
  return rounded == 0 ? kAlignment : rounded;
}

}  // namespace

HostAllocator::~HostAllocator() { ReleaseCached(); }

int64_t HostAllocator::cached_bytes() const {
  absl::MutexLock lock(&mu_);
  return cached_bytes_;
}

void HostAllocator::ReleaseCached() {
  absl::MutexLock lock(&mu_);
  for (auto& [size, blocks] : cached_) {
    for (void* block : blocks) ::operator delete(block, std::align_val_t(kAlignment));
  }
  cached_.clear();
  cached_bytes_ = 0;
}

absl::StatusOr<void*> HostAllocator::Allocate(int64_t bytes, MemoryKind kind) {
  if (bytes < 0) return absl::InvalidArgumentError("negative allocation size");
  if (limit_bytes_ > 0 && memory_.current() + bytes > limit_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        label_, ": allocating ", bytes, " bytes (", MemoryKindName(kind), ") exceeds the limit of ",
        limit_bytes_, " bytes (", memory_.current(), " in use)"));
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
  void* ptr = ::operator new(rounded, std::align_val_t(kAlignment), std::nothrow);
  if (ptr == nullptr) {
    ReleaseCached();  // blocks of other sizes may make room
    ptr = ::operator new(rounded, std::align_val_t(kAlignment), std::nothrow);
  }
  if (ptr == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(label_, ": out of memory allocating ", bytes,
                                                     " bytes (", MemoryKindName(kind), ")"));
  }
  memory_.Allocated(kind, bytes);
  return ptr;
}

void HostAllocator::Free(void* ptr, int64_t bytes, MemoryKind kind) {
  memory_.Freed(kind, bytes);
  const size_t rounded = Rounded(bytes);
  absl::MutexLock lock(&mu_);
  cached_[rounded].push_back(ptr);
  cached_bytes_ += static_cast<int64_t>(rounded);
}

void HostAllocator::Recount(int64_t bytes, MemoryKind from, MemoryKind to) {
  memory_.Moved(from, to, bytes);
}

}  // namespace gpipe

#include "runtime/core/memory_tracker.h"

#include <algorithm>

namespace gpipe {

const char* MemoryKindName(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kParameter:
      return "parameter";
    case MemoryKind::kGradient:
      return "gradient";
    case MemoryKind::kOptimizerState:
      return "optimizer_state";
    case MemoryKind::kBoundary:
      return "boundary";
    case MemoryKind::kActivation:
      return "activation";
    case MemoryKind::kWorkspace:
      return "workspace";
    case MemoryKind::kData:
      return "data";
    case MemoryKind::kBoundaryGrad:
      return "boundary_grad";
    case MemoryKind::kCount:
      break;
  }
  return "unknown";
}

void MemoryTracker::Allocated(MemoryKind kind, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  const int k = static_cast<int>(kind);
  current_ += bytes;
  peak_ = std::max(peak_, current_);
  current_by_kind_[k] += bytes;
  peak_by_kind_[k] = std::max(peak_by_kind_[k], current_by_kind_[k]);
}

void MemoryTracker::Freed(MemoryKind kind, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  current_ -= bytes;
  current_by_kind_[static_cast<int>(kind)] -= bytes;
}

void MemoryTracker::Moved(MemoryKind from, MemoryKind to, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  current_by_kind_[static_cast<int>(from)] -= bytes;
  const int k = static_cast<int>(to);
  current_by_kind_[k] += bytes;
  peak_by_kind_[k] = std::max(peak_by_kind_[k], current_by_kind_[k]);
}

int64_t MemoryTracker::current() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

int64_t MemoryTracker::peak() const {
  absl::MutexLock lock(&mu_);
  return peak_;
}

int64_t MemoryTracker::current(MemoryKind kind) const {
  absl::MutexLock lock(&mu_);
  return current_by_kind_[static_cast<int>(kind)];
}

int64_t MemoryTracker::peak(MemoryKind kind) const {
  absl::MutexLock lock(&mu_);
  return peak_by_kind_[static_cast<int>(kind)];
}

void MemoryTracker::ResetPeaks() {
  absl::MutexLock lock(&mu_);
  peak_ = current_;
  peak_by_kind_ = current_by_kind_;
}

}  // namespace gpipe

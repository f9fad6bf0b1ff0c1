#include "runtime/device/capture_memory.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace gpipe {

CaptureMemory::GraphHold::~GraphHold() { memory_.Release(std::move(deferred_)); }

CaptureMemory::~CaptureMemory() {
  for (const GraphHold::DeferredFree& free : deferred_) {
    backing_.Free(free.ptr, free.bytes, free.kind);
  }
  for (const auto& [ptr, block] : blocks_) backing_.Free(ptr, block.bytes, block.kind);
}

absl::Status CaptureMemory::Begin() {
  if (capturing_) {
    return absl::FailedPreconditionError(
        absl::StrCat(device_name_, ": a capture began while another was open"));
  }
  capturing_ = true;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CaptureMemory::GraphHold>> CaptureMemory::End() {
  if (!capturing_) {
    return absl::FailedPreconditionError(
        absl::StrCat(device_name_, ": a capture ended that had not begun"));
  }
  capturing_ = false;
  ++graphs_;
  return std::unique_ptr<GraphHold>(new GraphHold(*this, std::exchange(deferred_, {})));
}

absl::StatusOr<void*> CaptureMemory::Allocate(int64_t bytes, MemoryKind kind) {
  if (!capturing_) {
    return absl::FailedPreconditionError(
        absl::StrCat(device_name_, ": capture memory asked for outside a capture"));
  }
  const auto sized = free_by_size_.find(bytes);
  if (sized != free_by_size_.end() && !sized->second.empty()) {
    void* ptr = sized->second.back();
    sized->second.pop_back();
    Block& block = blocks_.at(ptr);
    if (block.kind != kind) backing_.Recount(block.bytes, block.kind, kind);
    block.kind = kind;
    block.state = BlockState::kInUse;
    return ptr;
  }
  absl::StatusOr<void*> ptr = backing_.Allocate(bytes, kind);
  if (!ptr.ok()) return ptr.status();
  blocks_.emplace(*ptr, Block{.bytes = bytes, .kind = kind, .state = BlockState::kInUse});
  return *ptr;
}

bool CaptureMemory::Free(void* ptr, int64_t bytes, MemoryKind kind) {
  if (!capturing_ && blocks_.empty()) return false;  // never captured, or all given back
  const auto it = blocks_.find(ptr);
  if (it == blocks_.end()) {
    if (!capturing_) return false;
    deferred_.push_back({.ptr = ptr, .bytes = bytes, .kind = kind});
    return true;
  }
  Block& block = it->second;
  block.kind = kind;
  if (capturing_) {
    block.state = BlockState::kFree;
    free_by_size_[block.bytes].push_back(ptr);
  } else if (graphs_ > 0) {
    block.state = BlockState::kReserved;
  } else {
    backing_.Free(ptr, block.bytes, block.kind);
    blocks_.erase(it);
  }
  return true;
}

int64_t CaptureMemory::block_bytes() const {
  int64_t total = 0;
  for (const auto& [ptr, block] : blocks_) total += block.bytes;
  return total;
}

void CaptureMemory::Release(std::vector<GraphHold::DeferredFree> deferred) {
  if (capturing_) {
    // A graph destroyed during another capture: its frees would be captured too (and a stream
    // capture cannot free memory it did not allocate), so the open capture's graph takes them.
    deferred_.insert(deferred_.end(), deferred.begin(), deferred.end());
  } else {
    for (const GraphHold::DeferredFree& free : deferred) {
      backing_.Free(free.ptr, free.bytes, free.kind);
    }
  }
  --graphs_;
  if (Idle()) ReturnIdleBlocks();
}

void CaptureMemory::ReturnIdleBlocks() {
  for (auto it = blocks_.begin(); it != blocks_.end();) {
    if (it->second.state == BlockState::kInUse) {
      ++it;
      continue;
    }
    backing_.Free(it->first, it->second.bytes, it->second.kind);
    blocks_.erase(it++);
  }
  free_by_size_.clear();
}

}  // namespace gpipe

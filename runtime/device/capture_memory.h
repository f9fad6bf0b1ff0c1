// CaptureMemory: the memory rules of captured work (Device::BeginCapture), shared by the devices
// that capture. A captured graph runs its allocations again at every Launch, at the addresses
// they had in the capture, so the memory captured work allocates must stay the graph's between
// launches; and memory the work frees but did not allocate must stay valid while the graph may
// launch. Concretely:
// - While capturing, Allocate hands out blocks of the capture arena: a free block of exactly the
//   size asked for (free because captured work freed it, in this capture or an earlier one), else
//   a new block from the device's memory (`backing`). Launching graphs in the order they were
//   captured, one after the other on one stream, then replays every use of a reused block in
//   the order the captures saw, so a block is never written before the work that last read it.
// - Free of an arena block while capturing puts it back for later allocations (the free is part
//   of the captured order). Free of an arena block outside any capture (the host let go of a
//   tensor the graph made: a sent output, say) keeps it reserved for its graph: the next Launch
//   writes it again, and no other allocation gets it.
// - Free of memory the arena did not hand out while capturing (a tensor allocated before the
//   capture, read by the captured work, dropped during it) is deferred until the graph that was
//   being captured is destroyed (GraphHold).
// - Arena blocks go back to `backing` when no graph holds the arena and no capture is open: free
//   and reserved blocks at once, blocks still held by tensors when those tensors let go.
// Every block is counted by `backing` under the kind of the tensor that holds it (or last held
// it) for as long as the arena keeps it: graph memory is device memory in use.
// Thread-compatible: the device's one issuing thread calls it.
#ifndef GPIPE_RUNTIME_DEVICE_CAPTURE_MEMORY_H_
#define GPIPE_RUNTIME_DEVICE_CAPTURE_MEMORY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/core/allocator.h"
#include "runtime/core/memory_tracker.h"

namespace gpipe {

class CaptureMemory {
 public:
  // What a captured graph holds of capture memory: the frees deferred during its capture, done
  // when it goes, and a share in keeping the arena's blocks. Destroy it after the graph's last
  // Launch has been issued (frees through `backing` are ordered after issued work).
  class GraphHold {
   public:
    ~GraphHold();
    GraphHold(const GraphHold&) = delete;
    GraphHold& operator=(const GraphHold&) = delete;

   private:
    friend class CaptureMemory;
    struct DeferredFree {
      void* ptr;
      int64_t bytes;
      MemoryKind kind;
    };
    GraphHold(CaptureMemory& memory, std::vector<DeferredFree> deferred)
        : memory_(memory), deferred_(std::move(deferred)) {}

    CaptureMemory& memory_;
    std::vector<DeferredFree> deferred_;
  };

  // `backing`: the device's own memory; must outlive this object, which must outlive every
  // GraphHold it made. `device_name` words errors ("cpu", "cuda:0").
  CaptureMemory(std::string device_name, Allocator& backing)
      : device_name_(std::move(device_name)), backing_(backing) {}
  // Every block still kept goes back to `backing` (tensors holding arena blocks must be gone).
  ~CaptureMemory();
  CaptureMemory(const CaptureMemory&) = delete;
  CaptureMemory& operator=(const CaptureMemory&) = delete;

  bool capturing() const { return capturing_; }
  // FAILED_PRECONDITION when a capture is already open.
  absl::Status Begin();
  // Closes the capture: the hold its graph keeps. FAILED_PRECONDITION when none is open.
  absl::StatusOr<std::unique_ptr<GraphHold>> End();

  // While capturing: an arena block of `bytes` counted under `kind`. FAILED_PRECONDITION
  // outside a capture; `backing`'s error when it has no room.
  absl::StatusOr<void*> Allocate(int64_t bytes, MemoryKind kind);
  // Takes the free of `ptr` when the rules above make it the arena's business (an arena block,
  // or any memory while capturing) and returns true; false: the caller frees it as usual.
  bool Free(void* ptr, int64_t bytes, MemoryKind kind);

  // Blocks the arena keeps, and their bytes (for tests and reports).
  int64_t blocks() const { return static_cast<int64_t>(blocks_.size()); }
  int64_t block_bytes() const;

 private:
  enum class BlockState { kInUse, kFree, kReserved };
  struct Block {
    int64_t bytes;
    MemoryKind kind;  // the holder's kind when it was last freed
    BlockState state;
  };

  // A GraphHold went: its deferred frees are done; with no graph left, idle blocks go back.
  void Release(std::vector<GraphHold::DeferredFree> deferred);
  // With no graph and no capture: free and reserved blocks back to `backing`.
  void ReturnIdleBlocks();
  bool Idle() const { return graphs_ == 0 && !capturing_; }

  const std::string device_name_;
  Allocator& backing_;
  bool capturing_ = false;
  int64_t graphs_ = 0;                             // GraphHolds alive
  std::vector<GraphHold::DeferredFree> deferred_;  // the open capture's
  absl::flat_hash_map<void*, Block> blocks_;
  // Free blocks by exact size, most recently freed last.
  absl::flat_hash_map<int64_t, std::vector<void*>> free_by_size_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CAPTURE_MEMORY_H_

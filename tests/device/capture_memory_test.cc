// CaptureMemory's rules on their own, over a host allocator whose counts show every block it
// hands out and takes back.
#include "runtime/device/capture_memory.h"

#include <memory>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "runtime/core/host_allocator.h"
#include "runtime/core/memory_tracker.h"

namespace gpipe {
namespace {

class CaptureMemoryTest : public ::testing::Test {
 protected:
  void* Allocate(int64_t bytes, MemoryKind kind = MemoryKind::kActivation) {
    absl::StatusOr<void*> ptr = memory_.Allocate(bytes, kind);
    EXPECT_TRUE(ptr.ok()) << ptr.status();
    return ptr.ok() ? *ptr : nullptr;
  }
  // A free the device does itself when the arena does not take it.
  void Free(void* ptr, int64_t bytes, MemoryKind kind = MemoryKind::kActivation) {
    if (!memory_.Free(ptr, bytes, kind)) backing_.Free(ptr, bytes, kind);
  }
  std::unique_ptr<CaptureMemory::GraphHold> End() {
    absl::StatusOr<std::unique_ptr<CaptureMemory::GraphHold>> hold = memory_.End();
    EXPECT_TRUE(hold.ok()) << hold.status();
    return hold.ok() ? *std::move(hold) : nullptr;
  }
  int64_t counted() { return backing_.memory().current(); }

  HostAllocator backing_{"test"};
  CaptureMemory memory_{"test", backing_};
};

TEST_F(CaptureMemoryTest, AllocatesOnlyWhileCapturing) {
  EXPECT_EQ(memory_.Allocate(64, MemoryKind::kActivation).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(memory_.End().status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(memory_.Begin().ok());
  EXPECT_EQ(memory_.Begin().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(memory_.capturing());
  EXPECT_NE(End(), nullptr);
  EXPECT_FALSE(memory_.capturing());
}

// Freed in a capture, a block serves the next allocation of exactly its size, in the same capture
// or a later one; another size gets a new block.
TEST_F(CaptureMemoryTest, ABlockFreedInACaptureServesTheNextOfItsSize) {
  ASSERT_TRUE(memory_.Begin().ok());
  void* first = Allocate(256);
  Free(first, 256);
  EXPECT_EQ(Allocate(256), first);
  void* other = Allocate(128);
  EXPECT_NE(other, first);
  Free(first, 256);
  auto hold = End();
  ASSERT_TRUE(memory_.Begin().ok());
  EXPECT_EQ(Allocate(256), first);
  EXPECT_EQ(memory_.blocks(), 2);
  EXPECT_EQ(memory_.block_bytes(), 384);
  auto second = End();
}

// Let go outside a capture, a block stays its graph's: no allocation gets it, and it is counted
// until no graph remains.
TEST_F(CaptureMemoryTest, ABlockLetGoOutsideACaptureStaysReserved) {
  ASSERT_TRUE(memory_.Begin().ok());
  void* out = Allocate(512);
  auto hold = End();
  Free(out, 512);  // the host sent it, say
  EXPECT_EQ(counted(), 512);
  ASSERT_TRUE(memory_.Begin().ok());
  EXPECT_NE(Allocate(512), out);
  auto second = End();
  EXPECT_EQ(counted(), 1024);
  hold.reset();
  EXPECT_EQ(counted(), 1024);  // the second graph still holds the arena; its block is in use
  second.reset();
  EXPECT_EQ(counted(), 512);  // the reserved block went back; the in-use one waits for its tensor
  EXPECT_EQ(memory_.blocks(), 1);
}

// Memory the arena did not hand out, freed during a capture, is freed when that capture's graph
// goes; a graph destroyed during another capture hands its deferred frees to that one.
TEST_F(CaptureMemoryTest, FreesOfOtherMemoryWaitForTheGraph) {
  void* before = backing_.Allocate(64, MemoryKind::kActivation).value();
  void* also_before = backing_.Allocate(32, MemoryKind::kActivation).value();
  ASSERT_TRUE(memory_.Begin().ok());
  Free(before, 64);
  auto hold = End();
  EXPECT_EQ(counted(), 96);
  ASSERT_TRUE(memory_.Begin().ok());
  Free(also_before, 32);
  hold.reset();  // during the second capture: its free moves to the second graph
  EXPECT_EQ(counted(), 96);
  auto second = End();
  EXPECT_EQ(counted(), 96);
  second.reset();
  EXPECT_EQ(counted(), 0);
}

// A reused block is recounted under its new holder's kind, and given back under the kind of the
// last tensor that held it.
TEST_F(CaptureMemoryTest, ReuseRecountsTheKind) {
  ASSERT_TRUE(memory_.Begin().ok());
  void* block = Allocate(128, MemoryKind::kActivation);
  Free(block, 128, MemoryKind::kActivation);
  EXPECT_EQ(Allocate(128, MemoryKind::kWorkspace), block);
  EXPECT_EQ(backing_.memory().current(MemoryKind::kWorkspace), 128);
  EXPECT_EQ(backing_.memory().current(MemoryKind::kActivation), 0);
  Free(block, 128, MemoryKind::kWorkspace);
  End().reset();
  EXPECT_EQ(counted(), 0);
}

// With no graph left and no capture open, blocks a tensor still holds go back when it lets go.
TEST_F(CaptureMemoryTest, ABlockHeldPastItsGraphGoesBackWhenLetGo) {
  ASSERT_TRUE(memory_.Begin().ok());
  void* kept = Allocate(64);
  End().reset();
  EXPECT_EQ(counted(), 64);
  Free(kept, 64);
  EXPECT_EQ(counted(), 0);
  EXPECT_EQ(memory_.blocks(), 0);
}

}  // namespace
}  // namespace gpipe

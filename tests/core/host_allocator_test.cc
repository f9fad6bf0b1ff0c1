#include "runtime/core/host_allocator.h"

#include <cstdint>
#include <cstring>

#include "gtest/gtest.h"

namespace gpipe {
namespace {

TEST(HostAllocatorTest, FreedBlocksAreReusedForTheSameSizeAndNotCountedAsInUse) {
  HostAllocator allocator("test");
  void* first = *allocator.Allocate(1000, MemoryKind::kActivation);
  std::memset(first, 7, 1000);
  allocator.Free(first, 1000, MemoryKind::kActivation);
  EXPECT_EQ(allocator.memory().current(), 0);
  EXPECT_EQ(allocator.cached_bytes(), 1024);  // rounded to 64 bytes
  // The same rounded size (1000 and 1020 both round to 1024) gets the cached block back.
  void* second = *allocator.Allocate(1020, MemoryKind::kBoundary);
  EXPECT_EQ(second, first);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(second) % 64, 0u);
  EXPECT_EQ(allocator.cached_bytes(), 0);
  EXPECT_EQ(allocator.memory().current(MemoryKind::kBoundary), 1020);
  // Another size gets another block.
  void* third = *allocator.Allocate(4096, MemoryKind::kBoundary);
  EXPECT_NE(third, second);
  allocator.Free(second, 1020, MemoryKind::kBoundary);
  allocator.Free(third, 4096, MemoryKind::kBoundary);
  EXPECT_EQ(allocator.cached_bytes(), 1024 + 4096);
  allocator.ReleaseCached();
  EXPECT_EQ(allocator.cached_bytes(), 0);
  EXPECT_EQ(allocator.memory().current(), 0);
  EXPECT_EQ(allocator.memory().peak(), 1020 + 4096);
}

TEST(HostAllocatorTest, TheLimitCountsLiveBytesOnly) {
  HostAllocator allocator("test", /*limit_bytes=*/4096);
  void* block = *allocator.Allocate(4096, MemoryKind::kData);
  EXPECT_EQ(allocator.Allocate(1, MemoryKind::kData).status().code(),
            absl::StatusCode::kResourceExhausted);
  allocator.Free(block, 4096, MemoryKind::kData);
  // The cached block does not count against the limit.
  void* again = *allocator.Allocate(4000, MemoryKind::kData);
  allocator.Free(again, 4000, MemoryKind::kData);
}

}  // namespace
}  // namespace gpipe

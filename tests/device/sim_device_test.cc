// SimDevice: exact byte accounting with fake addresses, the memory limit, no computation, and
// the bookkeeping of Occupy.
#include "runtime/device/sim/sim_device.h"

#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <memory>
#include <set>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "runtime/core/tensor.h"

namespace gpipe {
namespace {

// Resident set size of this process, from /proc/self/statm.
int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

TEST(SimDeviceTest, AllocationsAreDistinctAlignedAndCountedByKind) {
  SimDevice device;
  EXPECT_FALSE(device.host_accessible());
  std::set<uintptr_t> addresses;
  std::vector<void*> pointers;
  for (int64_t bytes : {0, 1, 63, 64, 65, 4096}) {
    absl::StatusOr<void*> ptr = device.Allocate(bytes, MemoryKind::kActivation);
    ASSERT_TRUE(ptr.ok()) << ptr.status();
    ASSERT_NE(*ptr, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(*ptr) % 64, 0u);
    EXPECT_TRUE(addresses.insert(reinterpret_cast<uintptr_t>(*ptr)).second);
    pointers.push_back(*ptr);
  }
  EXPECT_EQ(device.memory().current(MemoryKind::kActivation), 0 + 1 + 63 + 64 + 65 + 4096);
  device.Recount(4096, MemoryKind::kActivation, MemoryKind::kBoundary);
  EXPECT_EQ(device.memory().current(MemoryKind::kBoundary), 4096);
  device.Free(pointers.back(), 4096, MemoryKind::kBoundary);
  EXPECT_EQ(device.memory().current(), 0 + 1 + 63 + 64 + 65);
  EXPECT_EQ(device.memory().peak(), 0 + 1 + 63 + 64 + 65 + 4096);
  EXPECT_FALSE(device.Allocate(-1, MemoryKind::kData).ok());
}

TEST(SimDeviceTest, TensorsCountTheirBytesUntilTheLastViewGoes) {
  SimDevice device;
  {
    absl::StatusOr<Tensor> t =
        Tensor::Empty(device, Shape({8, 256}), DType::kF32, MemoryKind::kParameter);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(device.memory().current(MemoryKind::kParameter), 8 * 256 * 4);
    // A shape-only tensor cannot be copied through the host.
    EXPECT_FALSE(t->Clone(MemoryKind::kActivation).ok());
  }
  EXPECT_EQ(device.memory().current(), 0);
}

TEST(SimDeviceTest, TheLimitFailsLikeCpuDevice) {
  SimDevice device(SimDeviceOptions{.memory_limit_bytes = 1000});
  ASSERT_TRUE(device.Allocate(600, MemoryKind::kParameter).ok());
  absl::StatusOr<void*> over = device.Allocate(500, MemoryKind::kActivation);
  ASSERT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(over.status().message(),
            "sim: allocating 500 bytes (activation) exceeds the limit of 1000 bytes (600 in use)");
  EXPECT_EQ(device.memory().current(), 600);
  EXPECT_TRUE(device.Allocate(400, MemoryKind::kActivation).ok());
}

TEST(SimDeviceTest, HugeAllocationsReserveNoMemory) {
  SimDevice device;
  const int64_t before = ResidentBytes();
  std::vector<Tensor> parameters;
  for (int i = 0; i < 16; ++i) {  // 16 x 1 GiB
    absl::StatusOr<Tensor> t =
        Tensor::Empty(device, Shape({16384, 16384}), DType::kF32, MemoryKind::kParameter);
    ASSERT_TRUE(t.ok()) << t.status();
    parameters.push_back(*std::move(t));
  }
  EXPECT_EQ(device.memory().current(MemoryKind::kParameter), int64_t{16} << 30);
  EXPECT_LT(ResidentBytes() - before, int64_t{64} << 20);
}

TEST(SimDeviceTest, OccupyAccountsForEveryDurationAndSleepsAtLeastThatLong) {
  SimDevice device;
  const absl::Time begin = absl::Now();
  ASSERT_TRUE(device.Occupy(absl::Milliseconds(2)).ok());
  EXPECT_GE(absl::Now() - begin, absl::Milliseconds(2));
  ASSERT_TRUE(device.Occupy(absl::ZeroDuration()).ok());
  ASSERT_TRUE(device.Occupy(absl::Microseconds(300)).ok());
  EXPECT_EQ(device.occupied(), absl::Microseconds(2300));
  EXPECT_EQ(device.Occupy(absl::Microseconds(-1)).code(), absl::StatusCode::kInvalidArgument);
}

// Offload copies run on a modelled copy engine per direction at host_link_gbps: one copy at a
// time per direction, both directions at once, the compute waiting only in OrderComputeAfter.
// 4 MB at 1 GB/s is 4 ms.
TEST(SimDeviceTest, OffloadCopiesTakeTheirBytesOverTheHostLink) {
  SimDevice device(SimDeviceOptions{.host_link_gbps = 1});
  const auto tensor = [](Allocator& memory) {
    absl::StatusOr<Tensor> t =
        Tensor::Empty(memory, Shape({1000000}), DType::kF32, MemoryKind::kBoundary);
    GPIPE_CHECK(t.ok()) << t.status();
    return *std::move(t);
  };
  const Tensor a = tensor(device), b = tensor(device);
  const Tensor host_a = tensor(device.offload_host()), host_b = tensor(device.offload_host());
  EXPECT_EQ(device.offload_memory().current(MemoryKind::kBoundary), 8000000);
  EXPECT_EQ(device.memory().current(MemoryKind::kBoundary), 8000000);
  const absl::Time begin = absl::Now();
  absl::StatusOr<std::unique_ptr<AsyncCopy>> out_a = device.StartCopyToHost(a, host_a);
  absl::StatusOr<std::unique_ptr<AsyncCopy>> out_b = device.StartCopyToHost(b, host_b);
  absl::StatusOr<std::unique_ptr<AsyncCopy>> in = device.StartCopyFromHost(host_a, b);
  ASSERT_TRUE(out_a.ok() && out_b.ok() && in.ok());
  EXPECT_LT(absl::Now() - begin, absl::Milliseconds(2)) << "starting a copy does not wait";
  EXPECT_FALSE(*(*out_b)->Finished());
  // The other direction's engine: done after one copy's time.
  ASSERT_TRUE((*in)->OrderComputeAfter().ok());
  EXPECT_GE(absl::Now() - begin, absl::Milliseconds(4));
  EXPECT_TRUE(*(*in)->Finished());
  // The second copy out queued behind the first: two copies' time.
  ASSERT_TRUE((*out_b)->OrderComputeAfter().ok());
  EXPECT_GE(absl::Now() - begin, absl::Milliseconds(8));
  EXPECT_TRUE(*(*out_a)->Finished());
  EXPECT_EQ(device.occupied(), absl::ZeroDuration()) << "copies are not compute";
  EXPECT_EQ(device.StartCopyToHost(a, b).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpipe

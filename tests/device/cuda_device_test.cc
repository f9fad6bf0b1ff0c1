// CudaDevice: creation errors (checked everywhere, GPU or not), and where a GPU is visible the
// pool's accounting and limits, pinned staging, copies both ways from pinned and pageable
// memory, events and Synchronize. GPU cases skip, saying why, when this process sees no GPU.
#include "runtime/device/cuda/cuda_device.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/core/tensor.h"
#include "runtime/device/cuda/pinned_host_allocator.h"

namespace gpipe {
namespace {

using ::testing::HasSubstr;

// Distinct, exactly representable values keyed by (seed, index), so a copy that moved, dropped
// or mixed elements shows up in an exact comparison.
std::vector<float> KeyedValues(int64_t n, int seed) {
  std::vector<float> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = static_cast<float>(seed * 1000003 + i % 4194304);
  return values;
}

TEST(CreateCudaDeviceTest, OrdinalBeyondTheVisibleGpusIsFailedPreconditionNamingBoth) {
  const int visible = VisibleGpuCount();
  ASSERT_GE(visible, 0);
  absl::StatusOr<std::unique_ptr<Device>> device = CreateCudaDevice({.ordinal = visible});
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), absl::StatusCode::kFailedPrecondition) << device.status();
  EXPECT_THAT(device.status().message(), HasSubstr(absl::StrCat("ordinal ", visible)));
  EXPECT_THAT(device.status().message(), HasSubstr(absl::StrCat("sees ", visible, " GPU")));
}

TEST(CreateCudaDeviceTest, NegativeOrdinalIsFailedPrecondition) {
  absl::StatusOr<std::unique_ptr<Device>> device = CreateCudaDevice({.ordinal = -1});
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), absl::StatusCode::kFailedPrecondition) << device.status();
  EXPECT_THAT(device.status().message(), HasSubstr("ordinal -1"));
}

TEST(CreateCudaDeviceTest, NegativeMemoryLimitIsInvalidArgument) {
  absl::StatusOr<std::unique_ptr<Device>> device =
      CreateCudaDevice({.ordinal = 0, .memory_limit_bytes = -1});
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), absl::StatusCode::kInvalidArgument) << device.status();
  EXPECT_THAT(device.status().message(), HasSubstr("memory_limit_bytes"));
}

TEST(CreateCudaDeviceTest, NoGpuMeansZeroVisibleAndOrdinalZeroRefused) {
  if (VisibleGpuCount() > 0) GTEST_SKIP() << "a GPU is visible; this pins the GPU-less answer";
  absl::StatusOr<std::unique_ptr<Device>> device = CreateCudaDevice({.ordinal = 0});
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), absl::StatusCode::kFailedPrecondition) << device.status();
  EXPECT_THAT(device.status().message(), HasSubstr("ordinal 0"));
  EXPECT_THAT(device.status().message(), HasSubstr("sees 0 GPU"));
}

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (VisibleGpuCount() == 0) GTEST_SKIP() << "no GPU visible to this process";
    absl::StatusOr<std::unique_ptr<Device>> created = CreateCudaDevice({.ordinal = 0});
    ASSERT_TRUE(created.ok()) << created.status();
    device_ = *std::move(created);
  }

  // Copies `values` in from `source` (pinned or pageable), clobbers the source at once (the
  // contract lets the caller reuse it), reads the tensor back and compares exactly.
  void ExpectRoundTrip(const std::vector<float>& values, float* source, float* readback) {
    const int64_t bytes = static_cast<int64_t>(values.size() * sizeof(float));
    absl::StatusOr<Tensor> on_gpu = Tensor::Empty(
        *device_, Shape{static_cast<int64_t>(values.size())}, DType::kF32, MemoryKind::kData);
    ASSERT_TRUE(on_gpu.ok()) << on_gpu.status();
    std::memcpy(source, values.data(), bytes);
    ASSERT_TRUE(device_->CopyFromHost(source, bytes, *on_gpu).ok());
    std::memset(source, 0xff, bytes);
    ASSERT_TRUE(device_->CopyToHost(*on_gpu, readback, bytes).ok());
    EXPECT_EQ(std::memcmp(readback, values.data(), bytes), 0);
  }

  std::unique_ptr<Device> device_;
};

TEST_F(CudaDeviceTest, NameIsCudaAndTheOrdinal) {
  EXPECT_EQ(device_->name(), "cuda:0");
  EXPECT_FALSE(device_->host_accessible());
  EXPECT_TRUE(device_->host_staging().host_accessible());
}

TEST_F(CudaDeviceTest, PoolCountsLiveBytesAndPeaksByKind) {
  MemoryTracker& memory = device_->memory();
  std::vector<std::pair<void*, int64_t>> blocks;
  for (int64_t bytes : {int64_t{0}, int64_t{1}, int64_t{255}, int64_t{4096}, int64_t{1} << 20}) {
    absl::StatusOr<void*> ptr = device_->Allocate(bytes, MemoryKind::kActivation);
    ASSERT_TRUE(ptr.ok()) << ptr.status();
    ASSERT_NE(*ptr, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(*ptr) % 64, 0u) << bytes;  // the Allocator contract
    blocks.emplace_back(*ptr, bytes);
  }
  const int64_t total = 0 + 1 + 255 + 4096 + (int64_t{1} << 20);
  EXPECT_EQ(memory.current(MemoryKind::kActivation), total);
  EXPECT_EQ(memory.current(), total);

  device_->Recount(4096, MemoryKind::kActivation, MemoryKind::kBoundary);
  EXPECT_EQ(memory.current(MemoryKind::kActivation), total - 4096);
  EXPECT_EQ(memory.current(MemoryKind::kBoundary), 4096);
  device_->Recount(4096, MemoryKind::kBoundary, MemoryKind::kActivation);

  for (const auto& [ptr, bytes] : blocks) device_->Free(ptr, bytes, MemoryKind::kActivation);
  EXPECT_EQ(memory.current(), 0);
  EXPECT_EQ(memory.peak(), total);
  EXPECT_EQ(memory.peak(MemoryKind::kActivation), total);
  EXPECT_EQ(memory.peak(MemoryKind::kBoundary), 4096);
  EXPECT_TRUE(device_->Synchronize().ok());
}

TEST_F(CudaDeviceTest, AllocationBeyondTheLimitNamesRequestKindLimitAndUse) {
  absl::StatusOr<std::unique_ptr<Device>> limited =
      CreateCudaDevice({.ordinal = 0, .memory_limit_bytes = 1 << 20});
  ASSERT_TRUE(limited.ok()) << limited.status();
  absl::StatusOr<Tensor> held =
      Tensor::Empty(**limited, Shape{3 << 16}, DType::kF32, MemoryKind::kParameter);  // 768 KiB
  ASSERT_TRUE(held.ok()) << held.status();
  absl::StatusOr<void*> refused = (*limited)->Allocate(1 << 19, MemoryKind::kActivation);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("cuda:0"));
  EXPECT_THAT(refused.status().message(), HasSubstr("524288 bytes (activation)"));
  EXPECT_THAT(refused.status().message(), HasSubstr("limit of 1048576 bytes"));
  EXPECT_THAT(refused.status().message(), HasSubstr("786432 in use"));
  EXPECT_EQ((*limited)->memory().current(), 786432);
}

TEST_F(CudaDeviceTest, MoreThanTheGpuHoldsIsResourceExhaustedAndTheDeviceStaysUsable) {
  const int64_t petabyte = int64_t{1} << 50;
  absl::StatusOr<void*> refused = device_->Allocate(petabyte, MemoryKind::kWorkspace);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("out of GPU memory"));
  EXPECT_THAT(refused.status().message(), HasSubstr(absl::StrCat(petabyte, " bytes (workspace)")));
  EXPECT_EQ(device_->memory().current(), 0);
  // The refusal is reported once, not again as an error of queued work.
  EXPECT_TRUE(device_->Synchronize().ok());
  std::vector<float> readback(1024);
  std::vector<float> source(1024);
  ExpectRoundTrip(KeyedValues(1024, 7), source.data(), readback.data());
}

TEST_F(CudaDeviceTest, CopiesFromPageableMemoryRoundTripExactly) {
  const int64_t n = int64_t{1} << 22;  // 16 MiB: long enough that a missing wait would show
  std::vector<float> source(n);
  std::vector<float> readback(n);
  ExpectRoundTrip(KeyedValues(n, 1), source.data(), readback.data());
  EXPECT_TRUE(device_->Synchronize().ok());
}

TEST_F(CudaDeviceTest, CopiesFromPinnedStagingRoundTripExactly) {
  const int64_t n = int64_t{1} << 22;
  Allocator& staging = device_->host_staging();
  absl::StatusOr<Tensor> source = Tensor::Empty(staging, Shape{n}, DType::kF32, MemoryKind::kData);
  absl::StatusOr<Tensor> readback =
      Tensor::Empty(staging, Shape{n}, DType::kF32, MemoryKind::kData);
  ASSERT_TRUE(source.ok() && readback.ok());
  cudaPointerAttributes attributes = {};
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, source->raw_data()), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeHost);
  ExpectRoundTrip(KeyedValues(n, 2), source->data<float>(), readback->data<float>());
  // Twice more into fresh tensors: the pinned path orders each copy after the compute stream.
  ExpectRoundTrip(KeyedValues(n, 3), source->data<float>(), readback->data<float>());
  ExpectRoundTrip(KeyedValues(n, 4), source->data<float>(), readback->data<float>());
  EXPECT_TRUE(device_->Synchronize().ok());
}

TEST_F(CudaDeviceTest, StagingIsCountedApartAndCachedBySize) {
  auto* staging = dynamic_cast<PinnedHostAllocator*>(&device_->host_staging());
  ASSERT_NE(staging, nullptr);
  absl::StatusOr<void*> first = staging->Allocate(1000, MemoryKind::kData);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*first) % 64, 0u);
  EXPECT_EQ(staging->memory().current(MemoryKind::kData), 1000);
  EXPECT_EQ(device_->memory().current(), 0);
  staging->Free(*first, 1000, MemoryKind::kData);
  EXPECT_EQ(staging->memory().current(), 0);
  EXPECT_EQ(staging->cached_bytes(), 1024);
  absl::StatusOr<void*> second = staging->Allocate(1010, MemoryKind::kData);  // same 64-byte class
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*second, *first);
  EXPECT_EQ(staging->cached_bytes(), 0);
  staging->Free(*second, 1010, MemoryKind::kData);
  staging->ReleaseCached();
  EXPECT_EQ(staging->cached_bytes(), 0);
  EXPECT_EQ(staging->memory().peak(MemoryKind::kData), 1010);
}

TEST_F(CudaDeviceTest, CopiesCheckSizesAndWhereTheTensorLives) {
  absl::StatusOr<Tensor> on_gpu = Tensor::Empty(*device_, Shape{8}, DType::kF32, MemoryKind::kData);
  ASSERT_TRUE(on_gpu.ok());
  std::vector<float> host(8);
  EXPECT_EQ(device_->CopyFromHost(host.data(), 16, *on_gpu).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(device_->CopyToHost(*on_gpu, host.data(), 16).code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<Tensor> on_host =
      Tensor::Empty(device_->host_staging(), Shape{8}, DType::kF32, MemoryKind::kData);
  ASSERT_TRUE(on_host.ok());
  EXPECT_EQ(device_->CopyFromHost(host.data(), 32, *on_host).code(),
            absl::StatusCode::kInvalidArgument);
}

class ForeignEvent final : public DeviceEvent {};

TEST_F(CudaDeviceTest, EventsMeasureTheDeviceTimeOfACopy) {
  const int64_t n = int64_t{1} << 22;
  std::vector<float> values = KeyedValues(n, 5);
  absl::StatusOr<Tensor> on_gpu = Tensor::Empty(*device_, Shape{n}, DType::kF32, MemoryKind::kData);
  ASSERT_TRUE(on_gpu.ok());
  absl::StatusOr<std::unique_ptr<DeviceEvent>> start = device_->RecordEvent();
  ASSERT_TRUE(start.ok()) << start.status();
  ASSERT_TRUE(device_->CopyFromHost(values.data(), n * 4, *on_gpu).ok());
  absl::StatusOr<std::unique_ptr<DeviceEvent>> end = device_->RecordEvent();
  ASSERT_TRUE(end.ok()) << end.status();
  absl::StatusOr<double> seconds = device_->ElapsedSeconds(**start, **end);
  ASSERT_TRUE(seconds.ok()) << seconds.status();
  EXPECT_GE(*seconds, 0.0);
  EXPECT_LT(*seconds, 10.0);

  ForeignEvent foreign;
  EXPECT_EQ(device_->ElapsedSeconds(foreign, **end).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(device_->Synchronize().ok());
}

}  // namespace
}  // namespace gpipe

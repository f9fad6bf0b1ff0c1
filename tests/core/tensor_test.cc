#include "runtime/core/tensor.h"

#include "gtest/gtest.h"
#include "runtime/device/cpu/cpu_device.h"

namespace gpipe {
namespace {

TEST(ShapeTest, ElementsRowsAndEditing) {
  const Shape s{4, 3, 5};
  EXPECT_EQ(s.num_elements(), 60);
  EXPECT_EQ(s.rows(), 12);
  EXPECT_EQ(s.WithBatch(2), (Shape{2, 4, 3, 5}));
  EXPECT_EQ(s.WithoutBatch(), (Shape{3, 5}));
  EXPECT_EQ(s.WithLast(7), (Shape{4, 3, 7}));
  EXPECT_EQ(s.ToString(), "[4, 3, 5]");
  EXPECT_EQ(Shape().num_elements(), 1);
}

TEST(TensorTest, AllocationIsCountedUntilTheLastViewDies) {
  CpuDevice device;
  {
    auto t = Tensor::Zeros(device, Shape{8, 16}, DType::kF32, MemoryKind::kActivation);
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(device.memory().current(), 8 * 16 * 4);
    EXPECT_EQ(device.memory().current(MemoryKind::kActivation), 8 * 16 * 4);
    Tensor view = *t->SliceRows(2, 4);
    *t = Tensor();
    EXPECT_EQ(device.memory().current(), 8 * 16 * 4);  // the view keeps the storage
    EXPECT_EQ(view.shape(), (Shape{2, 16}));
  }
  EXPECT_EQ(device.memory().current(), 0);
  EXPECT_EQ(device.memory().peak(), 8 * 16 * 4);
  device.memory().ResetPeaks();
  EXPECT_EQ(device.memory().peak(), 0);
}

TEST(TensorTest, SliceRowsViewsTheRightElements) {
  CpuDevice device;
  Tensor t = *Tensor::Empty(device, Shape{4, 3}, DType::kF32, MemoryKind::kData);
  for (int i = 0; i < 12; ++i) t.f32()[i] = static_cast<float>(i);
  Tensor rows = *t.SliceRows(1, 3);
  ASSERT_EQ(rows.num_elements(), 6);
  EXPECT_EQ(rows.f32()[0], 3.0f);
  EXPECT_EQ(rows.f32()[5], 8.0f);
  EXPECT_TRUE(rows.SharesStorageWith(t));
  EXPECT_FALSE(t.SliceRows(3, 5).ok());
}

TEST(TensorTest, CloneCopiesAndReshapeShares) {
  CpuDevice device;
  Tensor t = *Tensor::Zeros(device, Shape{2, 3}, DType::kF32, MemoryKind::kData);
  Tensor copy = *t.Clone(MemoryKind::kWorkspace);
  copy.f32()[0] = 5.0f;
  EXPECT_EQ(t.f32()[0], 0.0f);
  EXPECT_EQ(device.memory().current(MemoryKind::kWorkspace), 24);
  Tensor flat = *t.Reshaped(Shape{6});
  flat.f32()[5] = 2.0f;
  EXPECT_EQ(t.f32()[5], 2.0f);
  EXPECT_FALSE(t.Reshaped(Shape{7}).ok());
}

TEST(TensorTest, Int64Tensors) {
  CpuDevice device;
  Tensor t = *Tensor::Zeros(device, Shape{3}, DType::kI64, MemoryKind::kData);
  t.data<int64_t>()[2] = 1234567890123;
  EXPECT_EQ(t.bytes(), 24);
  EXPECT_EQ(t.DebugString(), "i64[3]");
}

TEST(CpuDeviceTest, MemoryLimitIsEnforced) {
  CpuDevice device(CpuDeviceOptions{.threads = 1, .memory_limit_bytes = 1000});
  auto ok = Tensor::Empty(device, Shape{200}, DType::kF32, MemoryKind::kData);
  ASSERT_TRUE(ok.ok());
  auto too_much = Tensor::Empty(device, Shape{100}, DType::kF32, MemoryKind::kData);
  EXPECT_EQ(too_much.status().code(), absl::StatusCode::kResourceExhausted);
}

// Storage the host cannot read (a GPU's, a simulated device's): fake addresses, never touched.
class DeviceOnlyAllocator final : public Allocator {
 public:
  absl::StatusOr<void*> Allocate(int64_t bytes, MemoryKind kind) override {
    return reinterpret_cast<void*>(uintptr_t{1} << 40);
  }
  void Free(void*, int64_t, MemoryKind) override {}
  void Recount(int64_t, MemoryKind, MemoryKind) override {}
  bool host_accessible() const override { return false; }
};

TEST(TensorDeathTest, HostAccessToDeviceMemoryNamesTheTensor) {
  DeviceOnlyAllocator device_memory;
  Tensor t = *Tensor::Empty(device_memory, Shape{2, 3}, DType::kF32, MemoryKind::kBoundary);
  EXPECT_FALSE(t.host_accessible());
  EXPECT_DEATH(t.f32(), "host access to tensor f32\\[2, 3\\] \\(boundary\\)");
  EXPECT_DEATH(t.SetZero(), "SetZero on tensor f32\\[2, 3\\]");
}

}  // namespace
}  // namespace gpipe

// Conformance of the offload copies (Device::StartCopyToHost, StartCopyFromHost) on every
// backend: the bytes come back as they left, whatever the dtype, while other work is issued in
// between; the host memory is counted by offload_memory() and not by the device; tensors of the
// wrong memory or size are refused.
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "runtime/device/device.h"
#include "tests/device/backends_under_test.h"

namespace gpipe::testing {
namespace {

class OffloadCopyTest : public OpsConformanceTest {
 protected:
  // Waits (with a deadline) until `copy` says it has finished.
  static void ExpectFinishes(AsyncCopy& copy) {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    for (;;) {
      absl::StatusOr<bool> finished = copy.Finished();
      ASSERT_TRUE(finished.ok()) << finished.status();
      if (*finished) return;
      ASSERT_LT(absl::Now(), deadline) << "the copy never finished";
      absl::SleepFor(absl::Microseconds(50));
    }
  }
};
GPIPE_INSTANTIATE_ON_EVERY_BACKEND(OffloadCopyTest);

TEST_P(OffloadCopyTest, BytesComeBackAsTheyLeftWhileOtherWorkRuns) {
  std::vector<float> values = TestValues(7, 4099);
  // Bits that arithmetic would not keep: -0, a subnormal, infinities, a NaN payload.
  values[0] = -0.0f;
  values[1] = std::numeric_limits<float>::denorm_min();
  values[2] = std::numeric_limits<float>::infinity();
  values[3] = -std::numeric_limits<float>::infinity();
  uint32_t nan_bits = 0x7fc01234u;
  std::memcpy(&values[4], &nan_bits, sizeof(float));
  Tensor source = Upload(values, Shape{4099});
  const int64_t device_before = device().memory().current();
  absl::StatusOr<Tensor> host =
      Tensor::Empty(device().offload_host(), source.shape(), DType::kF32, MemoryKind::kBoundary);
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ(device().offload_memory().current(MemoryKind::kBoundary), source.bytes());
  EXPECT_EQ(device().memory().current(), device_before) << "host memory counted on the device";

  absl::StatusOr<std::unique_ptr<AsyncCopy>> out = device().StartCopyToHost(source, *host);
  ASSERT_TRUE(out.ok()) << out.status();
  // Work issued after the copy started may not disturb it: only the copy holds the source now,
  // so a copy that let go of it early would see its storage reused by `other` below.
  source = Tensor();
  Tensor other = Uninitialized(Shape{4099});
  ASSERT_TRUE(ops().tensor.Fill(other, 3.0).ok());
  ExpectFinishes(**out);
  out->reset();

  Tensor back = Uninitialized(Shape{4099});
  absl::StatusOr<std::unique_ptr<AsyncCopy>> in = device().StartCopyFromHost(*host, back);
  ASSERT_TRUE(in.ok()) << in.status();
  ASSERT_TRUE((*in)->OrderComputeAfter().ok());
  ASSERT_TRUE(ops().tensor.Add(back, other, other).ok());  // reads `back` after the copy
  const std::vector<float> returned = Download(back);
  ASSERT_EQ(returned.size(), values.size());
  EXPECT_EQ(std::memcmp(returned.data(), values.data(), values.size() * sizeof(float)), 0);
  EXPECT_EQ(Download(other)[10], values[10] + 3.0f);
  ExpectFinishes(**in);
}

TEST_P(OffloadCopyTest, EveryDTypeRoundTrips) {
  const std::vector<int64_t> ids = {0, -1, 1LL << 40, 7, std::numeric_limits<int64_t>::min()};
  const Tensor source = UploadIds(ids, Shape{5});
  absl::StatusOr<Tensor> host =
      Tensor::Empty(device().offload_host(), source.shape(), DType::kI64, MemoryKind::kBoundary);
  ASSERT_TRUE(host.ok()) << host.status();
  absl::StatusOr<std::unique_ptr<AsyncCopy>> out = device().StartCopyToHost(source, *host);
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectFinishes(**out);
  Tensor back = Uninitialized(Shape{5}, DType::kI64);
  absl::StatusOr<std::unique_ptr<AsyncCopy>> in = device().StartCopyFromHost(*host, back);
  ASSERT_TRUE(in.ok()) << in.status();
  ASSERT_TRUE((*in)->OrderComputeAfter().ok());
  EXPECT_EQ(DownloadIds(back), ids);
}

TEST_P(OffloadCopyTest, TensorsOfOtherMemoryOrSizeAreRefused) {
  const Tensor on_device = Upload(TestValues(1, 8), Shape{8});
  Tensor also_on_device = Uninitialized(Shape{8});
  absl::StatusOr<Tensor> host =
      Tensor::Empty(device().offload_host(), Shape{8}, DType::kF32, MemoryKind::kBoundary);
  absl::StatusOr<Tensor> short_host =
      Tensor::Empty(device().offload_host(), Shape{7}, DType::kF32, MemoryKind::kBoundary);
  ASSERT_TRUE(host.ok() && short_host.ok());
  EXPECT_EQ(device().StartCopyToHost(on_device, also_on_device).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(device().StartCopyToHost(on_device, *short_host).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(device().StartCopyToHost(*host, on_device).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(device().StartCopyFromHost(on_device, also_on_device).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(device().StartCopyFromHost(*short_host, also_on_device).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(device().StartCopyFromHost(*host, Tensor()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpipe::testing

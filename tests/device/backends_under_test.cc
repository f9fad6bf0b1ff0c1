#include "tests/device/backends_under_test.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/core/rng.h"
#include "runtime/device/cpu/cpu_device.h"

namespace gpipe::testing {

std::vector<BackendUnderTest> BackendsUnderTest() {
  std::vector<BackendUnderTest> backends;
  backends.push_back({"cpu", [] { return std::make_unique<CpuDevice>(); }});
  AppendOptionalBackendsUnderTest(backends);
  return backends;
}

std::string BackendName(const ::testing::TestParamInfo<BackendUnderTest>& info) {
  return info.param.name;
}

namespace {

template <typename T>
Tensor UploadTyped(Device& device, const std::vector<T>& values, const Shape& shape, DType dtype) {
  auto tensor = Tensor::Empty(device, shape, dtype, MemoryKind::kActivation);
  GPIPE_CHECK(tensor.ok()) << tensor.status();
  GPIPE_CHECK(static_cast<int64_t>(values.size()) == shape.num_elements())
      << values.size() << " values for " << shape.ToString();
  const absl::Status copied =
      device.CopyFromHost(values.data(), static_cast<int64_t>(values.size() * sizeof(T)), *tensor);
  GPIPE_CHECK(copied.ok()) << copied;
  return *std::move(tensor);
}

template <typename T>
std::vector<T> DownloadTyped(Device& device, const Tensor& tensor, DType dtype) {
  GPIPE_CHECK(tensor.dtype() == dtype) << tensor.DebugString();
  std::vector<T> values(tensor.num_elements());
  const absl::Status copied =
      device.CopyToHost(tensor, values.data(), static_cast<int64_t>(values.size() * sizeof(T)));
  GPIPE_CHECK(copied.ok()) << copied;
  return values;
}

}  // namespace

Tensor OpsConformanceTest::Upload(const std::vector<float>& values, const Shape& shape) {
  return UploadTyped(device(), values, shape, DType::kF32);
}

Tensor OpsConformanceTest::UploadIds(const std::vector<int64_t>& ids, const Shape& shape) {
  return UploadTyped(device(), ids, shape, DType::kI64);
}

Tensor OpsConformanceTest::UploadF64(const std::vector<double>& values, const Shape& shape) {
  return UploadTyped(device(), values, shape, DType::kF64);
}

Tensor OpsConformanceTest::Uninitialized(const Shape& shape, DType dtype) {
  auto tensor = Tensor::Empty(device(), shape, dtype, MemoryKind::kActivation);
  GPIPE_CHECK(tensor.ok()) << tensor.status();
  return *std::move(tensor);
}

Tensor OpsConformanceTest::Bf16Values(const std::vector<float>& values, DType dtype) {
  return Bf16Values(values, dtype, Shape{static_cast<int64_t>(values.size())});
}

Tensor OpsConformanceTest::Bf16Values(const std::vector<float>& values, DType dtype,
                                      const Shape& shape) {
  Tensor narrow = Uninitialized(shape, DType::kBF16);
  const absl::Status narrowed = ops().tensor.Cast(Upload(values, shape), narrow);
  GPIPE_CHECK(narrowed.ok()) << narrowed;
  if (dtype == DType::kBF16) return narrow;
  Tensor wide = Uninitialized(shape);
  const absl::Status widened = ops().tensor.Cast(narrow, wide);
  GPIPE_CHECK(widened.ok()) << widened;
  return wide;
}

std::vector<float> OpsConformanceTest::ValuesOf(const Tensor& t, bool round) {
  Tensor narrow = t;
  if (t.dtype() == DType::kF32 && round) {
    narrow = Uninitialized(t.shape(), DType::kBF16);
    const absl::Status narrowed = ops().tensor.Cast(t, narrow);
    GPIPE_CHECK(narrowed.ok()) << narrowed;
  }
  if (narrow.dtype() == DType::kF32) return Download(narrow);
  Tensor wide = Uninitialized(t.shape());
  const absl::Status widened = ops().tensor.Cast(narrow, wide);
  GPIPE_CHECK(widened.ok()) << widened;
  return Download(wide);
}

Tensor OpsConformanceTest::Zeros(const Shape& shape, DType dtype) {
  Tensor tensor = Uninitialized(shape, dtype);
  const absl::Status filled = ops().tensor.Fill(tensor, 0.0);
  GPIPE_CHECK(filled.ok()) << filled;
  return tensor;
}

std::vector<float> OpsConformanceTest::Download(const Tensor& tensor) {
  return DownloadTyped<float>(device(), tensor, DType::kF32);
}

std::vector<double> OpsConformanceTest::DownloadF64(const Tensor& tensor) {
  return DownloadTyped<double>(device(), tensor, DType::kF64);
}

std::vector<int64_t> OpsConformanceTest::DownloadIds(const Tensor& tensor) {
  return DownloadTyped<int64_t>(device(), tensor, DType::kI64);
}

std::vector<float> TestValues(uint64_t seed, int64_t count, float low, float high) {
  RandomStream stream(seed, {0x7e57da7a});
  std::vector<float> values(count);
  for (float& v : values) v = low + (high - low) * stream.NextUniform();
  return values;
}

void ExpectNear(const std::vector<float>& actual, const std::vector<double>& expected,
                double rel_tol, double abs_tol, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int reported = 0;
  int64_t bad = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double error = std::fabs(static_cast<double>(actual[i]) - expected[i]);
    const bool ok = error <= abs_tol + rel_tol * std::fabs(expected[i]);
    if (!ok && !(std::isnan(expected[i]) && std::isnan(actual[i]))) {
      ++bad;
      if (reported++ < 5) {
        ADD_FAILURE() << what << ": element " << i << " is " << actual[i] << ", expected "
                      << expected[i] << " (error " << error << ", allowed "
                      << abs_tol + rel_tol * std::fabs(expected[i]) << ")";
      }
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << actual.size() << " elements off";
}

}  // namespace gpipe::testing

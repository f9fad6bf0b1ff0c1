// The op conformance suite's fixture: every test of tests/device/ops_*_test.cc runs once per
// backend present in this build (CPU always; CUDA joins where it is built, with no new test
// code, and its cases skip where no GPU is visible). A test computes its expected values with an
// independent double-precision oracle written in the test, and checks the backend within the
// tolerance the test states for that op: the CPU reference backend and every other backend are held
// to the same oracle.
#ifndef GPIPE_TESTS_DEVICE_BACKENDS_UNDER_TEST_H_
#define GPIPE_TESTS_DEVICE_BACKENDS_UNDER_TEST_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/core/shape.h"
#include "runtime/core/tensor.h"
#include "runtime/device/device.h"
#include "runtime/device/ops.h"

namespace gpipe::testing {

struct BackendUnderTest {
  std::string name;  // "cpu", used in test names
  std::function<std::unique_ptr<Device>()> make;
  // Not empty: the backend is built in but cannot run here (no GPU visible); its cases skip,
  // saying this, and `make` is never called.
  std::string skip_reason;
  // Whether the fused attention's bf16-storage calls give the f32 call's results rounded to
  // bf16, bit for bit (attention_ops.h); false where they run on cuDNN
  // (runtime.cuda.cudnn_attention), which agrees with them to bf16 rounding only.
  bool bf16_attention_rounds_f32 = true;
};

// Backends built into this binary, CPU first; those that cannot run here carry a skip_reason.
std::vector<BackendUnderTest> BackendsUnderTest();

// Appends the backends this build has beyond the CPU. Defined by whichever source CMake picks:
// cuda_backend_under_test.cc ("cuda" and "cuda_fused" entries on GPU 0) where the CUDA backend is
// built, no_cuda_backend_under_test.cc (nothing) otherwise.
void AppendOptionalBackendsUnderTest(std::vector<BackendUnderTest>& backends);

class OpsConformanceTest : public ::testing::TestWithParam<BackendUnderTest> {
 protected:
  void SetUp() override {
    if (!GetParam().skip_reason.empty()) GTEST_SKIP() << GetParam().skip_reason;
    device_ = GetParam().make();
  }

  Device& device() { return *device_; }
  const Ops& ops() { return device_->ops(); }
  // An id-checking op's status as the caller finally sees it: an error the op returned, else what
  // the device's next wait reports (a device that checks ids without waiting, CUDA, reports a
  // bad id there; embedding_ops.h).
  absl::Status ReportedBy(absl::Status op_status) {
    return op_status.ok() ? device_->Synchronize() : op_status;
  }

  // A device tensor holding `values` (f32) / `ids` (i64) / zeros, counted as activations.
  Tensor Upload(const std::vector<float>& values, const Shape& shape);
  Tensor UploadIds(const std::vector<int64_t>& ids, const Shape& shape);
  Tensor UploadF64(const std::vector<double>& values, const Shape& shape);
  Tensor Zeros(const Shape& shape, DType dtype = DType::kF32);
  Tensor Uninitialized(const Shape& shape, DType dtype = DType::kF32);
  // A tensor of `dtype` (f32 or bf16) holding `values` rounded to bf16 (exact in either
  // dtype); 1-D unless `shape` is given.
  Tensor Bf16Values(const std::vector<float>& values, DType dtype);
  Tensor Bf16Values(const std::vector<float>& values, DType dtype, const Shape& shape);
  // The values of an f32 or bf16 tensor; `round` rounds f32 ones to bf16 first (a reference's
  // Cast of its f32 output).
  std::vector<float> ValuesOf(const Tensor& t, bool round);
  // The values of a device tensor, copied to the host.
  std::vector<float> Download(const Tensor& tensor);
  std::vector<double> DownloadF64(const Tensor& tensor);
  std::vector<int64_t> DownloadIds(const Tensor& tensor);

 private:
  std::unique_ptr<Device> device_;
};

// Deterministic test data keyed by (seed, index): uniform in [low, high).
std::vector<float> TestValues(uint64_t seed, int64_t count, float low = -1.0f, float high = 1.0f);

// Expects |actual[i] - expected[i]| <= abs_tol + rel_tol * |expected[i]| for every i (and equal
// sizes), reporting the first few offending indices.
void ExpectNear(const std::vector<float>& actual, const std::vector<double>& expected,
                double rel_tol, double abs_tol, const std::string& what);

// Test names: "cpu", "cuda", "cuda_fused".
std::string BackendName(const ::testing::TestParamInfo<BackendUnderTest>& info);

}  // namespace gpipe::testing

// Instantiates a TEST_P suite derived from OpsConformanceTest on every backend present.
#define GPIPE_INSTANTIATE_ON_EVERY_BACKEND(suite)                                      \
  INSTANTIATE_TEST_SUITE_P(Backends, suite,                                            \
                           ::testing::ValuesIn(::gpipe::testing::BackendsUnderTest()), \
                           ::gpipe::testing::BackendName)

#endif  // GPIPE_TESTS_DEVICE_BACKENDS_UNDER_TEST_H_

// Conformance of TensorOps on every backend (see backends_under_test.h). Random fills and
// dropout masks must give the same bits on every backend: they are compared exactly with the
// host's RandomStream.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/core/rng.h"
#include "tests/device/backends_under_test.h"

namespace gpipe::testing {
namespace {

class TensorOpsTest : public OpsConformanceTest {};
GPIPE_INSTANTIATE_ON_EVERY_BACKEND(TensorOpsTest);

// Element-wise float arithmetic is exact IEEE single precision on every backend.
constexpr double kExact = 0.0;

TEST_P(TensorOpsTest, FillSetsEveryElementOfEveryDType) {
  Tensor f = Uninitialized(Shape{3, 5});
  ASSERT_TRUE(ops().tensor.Fill(f, 2.5).ok());
  EXPECT_EQ(Download(f), std::vector<float>(15, 2.5f));
  Tensor d = Uninitialized(Shape{4}, DType::kF64);
  ASSERT_TRUE(ops().tensor.Fill(d, -0.125).ok());
  EXPECT_EQ(DownloadF64(d), std::vector<double>(4, -0.125));
  Tensor i = Uninitialized(Shape{2}, DType::kI64);
  ASSERT_TRUE(ops().tensor.Fill(i, 7).ok());
  EXPECT_EQ(DownloadIds(i), std::vector<int64_t>(2, 7));
}

TEST_P(TensorOpsTest, CopyNeedsTheSameDTypeAndCount) {
  const std::vector<float> values = TestValues(1, 12);
  const Tensor in = Upload(values, Shape{3, 4});
  Tensor out = Uninitialized(Shape{12});
  ASSERT_TRUE(ops().tensor.Copy(in, out).ok());
  EXPECT_EQ(Download(out), values);
  Tensor wrong = Uninitialized(Shape{11});
  EXPECT_EQ(ops().tensor.Copy(in, wrong).code(), absl::StatusCode::kInvalidArgument);
  Tensor ids = Uninitialized(Shape{12}, DType::kI64);
  EXPECT_EQ(ops().tensor.Copy(in, ids).code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(TensorOpsTest, AddAxpyAndScaleMatchFloatArithmetic) {
  const std::vector<float> a = TestValues(2, 37), b = TestValues(3, 37);
  Tensor ta = Upload(a, Shape{37});
  const Tensor tb = Upload(b, Shape{37});
  Tensor sum = Uninitialized(Shape{37});
  ASSERT_TRUE(ops().tensor.Add(ta, tb, sum).ok());
  std::vector<double> expected(37);
  for (int i = 0; i < 37; ++i) expected[i] = a[i] + b[i];
  ExpectNear(Download(sum), expected, kExact, kExact, "Add");

  ASSERT_TRUE(ops().tensor.Add(ta, tb, ta).ok()) << "in place";
  ExpectNear(Download(ta), expected, kExact, kExact, "Add in place");

  Tensor y = Upload(b, Shape{37});
  ASSERT_TRUE(ops().tensor.Axpy(-0.5f, Upload(a, Shape{37}), y).ok());
  for (int i = 0; i < 37; ++i) expected[i] = b[i] + -0.5f * a[i];
  ExpectNear(Download(y), expected, kExact, kExact, "Axpy");

  Tensor x = Upload(a, Shape{37});
  ASSERT_TRUE(ops().tensor.Scale(3.0f, x).ok());
  for (int i = 0; i < 37; ++i) expected[i] = a[i] * 3.0f;
  ExpectNear(Download(x), expected, kExact, kExact, "Scale");

  Tensor short_out = Uninitialized(Shape{36});
  EXPECT_EQ(ops().tensor.Add(ta, tb, short_out).code(), absl::StatusCode::kInvalidArgument);
}

// bf16 of f32 `value`, rounding to nearest even, as an f32.
float Bf16Oracle(float value) {
  if (std::isnan(value)) return value;
  const double magnitude = std::fabs(value);
  if (magnitude == 0 || std::isinf(value)) return value;
  int exponent;
  std::frexp(magnitude, &exponent);  // magnitude = m * 2^exponent, m in [0.5, 1)
  const double ulp = std::ldexp(1.0, std::max(exponent - 8, -133));  // 8 significant bits
  const double rounded = std::nearbyint(magnitude / ulp) * ulp;      // ties to even
  return static_cast<float>(std::copysign(rounded, value));
}

TEST_P(TensorOpsTest, CastsRoundToNearestEvenBf16AndBack) {
  const std::vector<float> values = {1.0f,
                                     1.00390625f /* 1 + 2^-8: tie, stays 1 */,
                                     1.01171875f /* 1 + 3 * 2^-8: tie, rounds up */,
                                     -3.14159f,
                                     65504.0f,
                                     1e-20f,
                                     std::numeric_limits<float>::infinity(),
                                     0.0f};
  const Tensor in = Upload(values, Shape{8});
  Tensor half = Uninitialized(Shape{8}, DType::kBF16);
  ASSERT_TRUE(ops().tensor.Cast(in, half).ok());
  Tensor back = Uninitialized(Shape{8});
  ASSERT_TRUE(ops().tensor.Cast(half, back).ok());
  const std::vector<float> got = Download(back);
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(got[i], Bf16Oracle(values[i])) << "element " << i << " = " << values[i];
  }
  EXPECT_EQ(got[1], 1.0f);
  EXPECT_EQ(got[2], 1.015625f);

  const std::vector<float> nan = {std::numeric_limits<float>::quiet_NaN()};
  Tensor nan_half = Uninitialized(Shape{1}, DType::kBF16);
  ASSERT_TRUE(ops().tensor.Cast(Upload(nan, Shape{1}), nan_half).ok());
  Tensor nan_back = Uninitialized(Shape{1});
  ASSERT_TRUE(ops().tensor.Cast(nan_half, nan_back).ok());
  EXPECT_TRUE(std::isnan(Download(nan_back)[0]));
}

TEST_P(TensorOpsTest, CastsBetweenF32AndF64) {
  const std::vector<float> values = TestValues(4, 9);
  Tensor wide = Uninitialized(Shape{9}, DType::kF64);
  ASSERT_TRUE(ops().tensor.Cast(Upload(values, Shape{9}), wide).ok());
  const std::vector<double> got = DownloadF64(wide);
  for (int i = 0; i < 9; ++i) EXPECT_EQ(got[i], static_cast<double>(values[i]));
  Tensor ids = Uninitialized(Shape{9}, DType::kI64);
  EXPECT_EQ(ops().tensor.Cast(wide, ids).code(), absl::StatusCode::kInvalidArgument);
}

// Sums of up to a few thousand floats in double, rounded once: within one float ulp.
constexpr double kSumRelTol = 1.2e-7;

TEST_P(TensorOpsTest, SumAccumulateAddsDoubleSumsOverOuterAndInner) {
  // Spread over inner (a convolution's bias), and inner == 1 (a linear layer's bias) with more
  // rows and columns than one block of a GPU kernel covers.
  struct Case {
    int64_t outer, mid, inner;
  };
  for (const Case c : {Case{5, 7, 9}, Case{300, 70, 1}, Case{3, 2, 1000}}) {
    const std::string name = absl::StrCat("SumAccumulate ", c.outer, "x", c.mid, "x", c.inner);
    const std::vector<float> in = TestValues(5, c.outer * c.mid * c.inner);
    const std::vector<float> start = TestValues(6, c.mid + 3);
    Tensor out = Upload(start, Shape{c.mid + 3});
    ASSERT_TRUE(
        ops()
            .tensor
            .SumAccumulate(Upload(in, Shape{c.outer, c.mid, c.inner}), c.outer, c.mid, c.inner, out)
            .ok())
        << name;
    std::vector<double> expected(start.begin(), start.end());
    for (int64_t m = 0; m < c.mid; ++m) {
      double sum = 0;
      for (int64_t o = 0; o < c.outer; ++o) {
        for (int64_t i = 0; i < c.inner; ++i) sum += in[(o * c.mid + m) * c.inner + i];
      }
      expected[m] = static_cast<float>(start[m] + static_cast<float>(sum));
    }
    ExpectNear(Download(out), expected, kSumRelTol, 1e-6, name + " (tail untouched)");
  }

  constexpr int64_t kOuter = 5, kMid = 7, kInner = 9;
  const std::vector<float> in = TestValues(5, kOuter * kMid * kInner);
  Tensor too_small = Uninitialized(Shape{kMid - 1});
  EXPECT_EQ(
      ops()
          .tensor
          .SumAccumulate(Upload(in, Shape{kOuter * kMid * kInner}), kOuter, kMid, kInner, too_small)
          .code(),
      absl::StatusCode::kInvalidArgument);
}

// A bf16 input (a mixed-precision output gradient) sums its exact values: the bits of the f32
// call on its widening.
TEST_P(TensorOpsTest, SumAccumulateOfBf16IsThatOfItsF32Widening) {
  struct Case {
    int64_t outer, mid, inner;
  };
  for (const Case c : {Case{5, 7, 9}, Case{300, 70, 1}, Case{3, 2, 1000}}) {
    const std::string name =
        absl::StrCat("SumAccumulate of bf16 ", c.outer, "x", c.mid, "x", c.inner);
    const Shape shape{c.outer, c.mid, c.inner};
    Tensor narrow = Uninitialized(shape, DType::kBF16);
    ASSERT_TRUE(ops().tensor.Cast(Upload(TestValues(7, shape.num_elements()), shape), narrow).ok());
    Tensor wide = Uninitialized(shape);
    ASSERT_TRUE(ops().tensor.Cast(narrow, wide).ok());
    const std::vector<float> start = TestValues(8, c.mid);
    Tensor from_bf16 = Upload(start, Shape{c.mid});
    Tensor from_f32 = Upload(start, Shape{c.mid});
    ASSERT_TRUE(ops().tensor.SumAccumulate(narrow, c.outer, c.mid, c.inner, from_bf16).ok())
        << name;
    ASSERT_TRUE(ops().tensor.SumAccumulate(wide, c.outer, c.mid, c.inner, from_f32).ok()) << name;
    EXPECT_EQ(Download(from_bf16), Download(from_f32)) << name;
  }
  Tensor out = Uninitialized(Shape{3});
  EXPECT_EQ(
      ops().tensor.SumAccumulate(Uninitialized(Shape{2, 3}, DType::kI64), 2, 3, 1, out).code(),
      absl::StatusCode::kInvalidArgument);
}

TEST_P(TensorOpsTest, SumAccumulateOfNoRowsAddsNothing) {
  Tensor out = Upload({1, 2, 3}, Shape{3});
  ASSERT_TRUE(ops().tensor.SumAccumulate(Uninitialized(Shape{0, 3}), 0, 3, 1, out).ok());
  EXPECT_EQ(Download(out), (std::vector<float>{1, 2, 3}));
}

TEST_P(TensorOpsTest, RandomFillsDrawTheHostStreamsBits) {
  const RandomKey key{.seed = 42, .key = {7, 3, 1}, .first_word = 5};
  Tensor uniform = Uninitialized(Shape{33});
  ASSERT_TRUE(ops().tensor.FillRandom(key, RandomDistribution::kUniform, -0.5, 2.0, uniform).ok());
  Tensor normal = Uninitialized(Shape{33});
  ASSERT_TRUE(ops().tensor.FillRandom(key, RandomDistribution::kNormal, 0.25, 0, normal).ok());
  RandomStream u(42, {7, 3, 1}), n(42, {7, 3, 1});
  u.Seek(5);
  n.Seek(5);
  const std::vector<float> got_u = Download(uniform), got_n = Download(normal);
  for (int i = 0; i < 33; ++i) {
    EXPECT_EQ(got_u[i], static_cast<float>(-0.5 + 2.0 * u.NextUniform())) << i;
    EXPECT_EQ(got_n[i], static_cast<float>(0.25 * n.NextNormal())) << i;
  }
}

TEST_P(TensorOpsTest, DropoutKeepsWhereTheUniformIsAtLeastP) {
  constexpr double kP = 0.3;
  const RandomKey key{.seed = 9, .key = {1, 2, 3}, .first_word = 100};
  const std::vector<float> in = TestValues(7, 200);
  Tensor out = Uninitialized(Shape{200});
  ASSERT_TRUE(ops().tensor.DropoutMask(key, kP, Upload(in, Shape{200}), out).ok());
  RandomStream stream(9, {1, 2, 3});
  stream.Seek(100);
  const float scale = static_cast<float>(1.0 / (1.0 - kP));
  const std::vector<float> got = Download(out);
  int kept = 0;
  for (int i = 0; i < 200; ++i) {
    const bool keep = static_cast<double>(stream.NextUniform()) >= kP;
    kept += keep;
    EXPECT_EQ(got[i], keep ? in[i] * scale : 0.0f) << i;
  }
  EXPECT_GT(kept, 100);
  EXPECT_LT(kept, 180);
  EXPECT_EQ(ops().tensor.DropoutMask(key, 1.0, Upload(in, Shape{200}), out).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(TensorOpsTest, FlagNonFiniteSetsTheFlagAndNeverClearsIt) {
  Tensor flag = Zeros(Shape{1});
  const std::vector<Tensor> finite = {Upload(TestValues(8, 10), Shape{10}),
                                      Upload({1e30f, -1e30f}, Shape{2})};
  ASSERT_TRUE(ops().tensor.FlagNonFinite(finite, flag).ok());
  EXPECT_EQ(Download(flag)[0], 0.0f);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    Tensor bad_flag = Zeros(Shape{1});
    const std::vector<Tensor> tensors = {finite[0], Upload({0.0f, bad, 1.0f}, Shape{3})};
    ASSERT_TRUE(ops().tensor.FlagNonFinite(tensors, bad_flag).ok());
    EXPECT_EQ(Download(bad_flag)[0], 1.0f) << bad;
    ASSERT_TRUE(ops().tensor.FlagNonFinite(finite, bad_flag).ok());
    EXPECT_EQ(Download(bad_flag)[0], 1.0f) << "a finite pass keeps the flag set";
  }
}

}  // namespace
}  // namespace gpipe::testing

// Conformance of the activation ops family on every backend (see backends_under_test.h):
// forward and backward of relu, tanh and exact GELU against double-precision formulas; SwiGLU's
// forward and backward against a double formula and central differences of the forward.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/device/ops/activation_checks.h"
#include "tests/device/backends_under_test.h"

namespace gpipe::testing {
namespace {

// relu and its gradient select or zero a value: no rounding at all.
constexpr double kExact = 0.0;
// tanh, erf and exp in float against the double formulas: a few float ulps (2^-24 ~ 6e-8
// relative) of values of order 1, plus an absolute floor for results near zero, where the
// float intermediate (e.g. 1 - y^2, 1 + erf) loses relative precision. The CPU is off by at
// most ~5e-8 here; 1e-6 leaves room for another backend's float erf/exp/tanh and still
// catches a wrong formula (the tanh approximation of GELU is off by ~1e-3).
constexpr double kTranscendentalRel = 1e-6;
constexpr double kTranscendentalAbs = 1e-6;

// SwiGLU: silu(g) * u from f32 exp, one f32 sum, quotient and product (~4 roundings of 2^-24
// relative, ~2.4e-7); its gradient adds f32 products and 1 - s, which loses relative precision
// where s ~ 1 (an absolute 2^-24 on 1 - s, times g up to 6 and dy * u up to 2: ~7e-7).
constexpr double kSwiGluRel = 1e-6;
constexpr double kSwiGluAbs = 1e-6;
constexpr double kSwiGluGradRel = 2e-6;
constexpr double kSwiGluGradAbs = 2e-6;
// Central differences of the f32 forward with a step of 1e-2: truncation ~h^2 |d^3 y| ~ 1e-4,
// f32 rounding of the loss (~1e-6 for a few values of order 10) over 2h ~ 5e-5; a wrong
// derivative (silu' taken as s, say) is off by 1e-1 or more.
constexpr double kFiniteDifferenceStep = 1e-2;
constexpr double kFiniteDifferenceTol = 1e-3;

double Silu(double g) { return g / (1.0 + std::exp(-g)); }
double SiluDerivative(double g) {
  const double s = 1.0 / (1.0 + std::exp(-g));
  return s + g * s * (1.0 - s);
}

double Phi(double x) { return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))); }
double PhiDensity(double x) { return std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI); }

class ActivationOpsTest : public OpsConformanceTest {};

TEST_P(ActivationOpsTest, ReluForwardAndBackward) {
  const std::vector<float> x = TestValues(1, 200, -3.0f, 3.0f);
  const Tensor xt = Upload(x, Shape{8, 25});
  Tensor y = Uninitialized(Shape{8, 25});
  ASSERT_TRUE(ops().activation.Forward(Activation::kRelu, xt, y).ok());
  std::vector<double> expected_y;
  for (float v : x) expected_y.push_back(std::max(static_cast<double>(v), 0.0));
  const std::vector<float> y_values = Download(y);
  ExpectNear(y_values, expected_y, kExact, kExact, "relu y");

  const std::vector<float> dy = TestValues(2, 200);
  Tensor dx = Uninitialized(Shape{8, 25});
  ASSERT_TRUE(ops().activation.Backward(Activation::kRelu, y, Upload(dy, Shape{8, 25}), dx).ok());
  std::vector<double> expected_dx;
  for (size_t i = 0; i < dy.size(); ++i) expected_dx.push_back(y_values[i] > 0.0f ? dy[i] : 0.0);
  ExpectNear(Download(dx), expected_dx, kExact, kExact, "relu dx");
}

TEST_P(ActivationOpsTest, ReluPassesNanAndZeroHasZeroGradient) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor y = Uninitialized(Shape{3});
  ASSERT_TRUE(
      ops().activation.Forward(Activation::kRelu, Upload({nan, 0.0f, -2.0f}, Shape{3}), y).ok());
  const std::vector<float> y_values = Download(y);
  EXPECT_TRUE(std::isnan(y_values[0]));
  EXPECT_EQ(y_values[1], 0.0f);
  EXPECT_EQ(y_values[2], 0.0f);
  Tensor dx = Uninitialized(Shape{2});
  ASSERT_TRUE(ops()
                  .activation
                  .Backward(Activation::kRelu, Upload({0.0f, 1.0f}, Shape{2}),
                            Upload({5.0f, 5.0f}, Shape{2}), dx)
                  .ok());
  ExpectNear(Download(dx), {0.0, 5.0}, kExact, kExact, "relu dx at 0");
}

TEST_P(ActivationOpsTest, TanhForwardAndBackwardFromTheOutput) {
  const std::vector<float> x = TestValues(3, 300, -4.0f, 4.0f);
  Tensor y = Uninitialized(Shape{300});
  ASSERT_TRUE(ops().activation.Forward(Activation::kTanh, Upload(x, Shape{300}), y).ok());
  std::vector<double> expected_y;
  for (float v : x) expected_y.push_back(std::tanh(static_cast<double>(v)));
  ExpectNear(Download(y), expected_y, kTranscendentalRel, kTranscendentalAbs, "tanh y");

  // The backward reads the output y (here: given values), dx = dy (1 - y^2).
  EXPECT_FALSE(ActivationBackwardReadsInput(Activation::kTanh));
  const std::vector<float> saved = TestValues(4, 300, -1.0f, 1.0f);
  const std::vector<float> dy = TestValues(5, 300);
  Tensor dx = Uninitialized(Shape{300});
  ASSERT_TRUE(
      ops()
          .activation
          .Backward(Activation::kTanh, Upload(saved, Shape{300}), Upload(dy, Shape{300}), dx)
          .ok());
  std::vector<double> expected_dx;
  for (size_t i = 0; i < dy.size(); ++i) {
    const double s = saved[i];
    expected_dx.push_back(dy[i] * (1.0 - s * s));
  }
  ExpectNear(Download(dx), expected_dx, kTranscendentalRel, kTranscendentalAbs, "tanh dx");
}

TEST_P(ActivationOpsTest, GeluIsExactAndItsBackwardReadsTheInput) {
  const std::vector<float> x = TestValues(6, 400, -5.0f, 5.0f);
  const Tensor xt = Upload(x, Shape{20, 20});
  Tensor y = Uninitialized(Shape{20, 20});
  ASSERT_TRUE(ops().activation.Forward(Activation::kGelu, xt, y).ok());
  std::vector<double> expected_y;
  for (float v : x) expected_y.push_back(v * Phi(v));
  ExpectNear(Download(y), expected_y, kTranscendentalRel, kTranscendentalAbs, "gelu y");

  EXPECT_TRUE(ActivationBackwardReadsInput(Activation::kGelu));
  const std::vector<float> dy = TestValues(7, 400);
  Tensor dx = Uninitialized(Shape{20, 20});
  ASSERT_TRUE(ops().activation.Backward(Activation::kGelu, xt, Upload(dy, Shape{20, 20}), dx).ok());
  std::vector<double> expected_dx;
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    expected_dx.push_back(dy[i] * (Phi(v) + v * PhiDensity(v)));
  }
  ExpectNear(Download(dx), expected_dx, kTranscendentalRel, kTranscendentalAbs, "gelu dx");
}

// Mixed precision's storage: any operand may be bf16. The result is the f32 call's on the exact
// widening of the bf16 inputs, a bf16 output that result rounded (Cast): the same bits, for every
// dtype of every operand, over more elements than one of the CPU's blocks (256) and a ragged end.
TEST_P(ActivationOpsTest, Bf16OperandsGiveTheF32CallsBitsRounded) {
  constexpr int64_t kCount = 1000;
  const Shape shape{kCount};
  const std::vector<float> x = TestValues(21, kCount, -4.0f, 4.0f);
  const std::vector<float> dy = TestValues(22, kCount);
  const DType kDTypes[] = {DType::kF32, DType::kBF16};
  for (Activation activation : {Activation::kRelu, Activation::kTanh, Activation::kGelu}) {
    const std::string name = op_checks::ActivationName(activation);
    Tensor y_ref = Uninitialized(shape);
    ASSERT_TRUE(ops().activation.Forward(activation, Bf16Values(x, DType::kF32), y_ref).ok());
    // Backward reads x or y; the reference reads the bf16-rounded values of either.
    const Tensor saved_ref = ActivationBackwardReadsInput(activation)
                                 ? Bf16Values(x, DType::kF32)
                                 : Bf16Values(ValuesOf(y_ref, /*round=*/true), DType::kF32);
    const std::vector<float> saved_values = ValuesOf(saved_ref, false);
    Tensor dx_ref = Uninitialized(shape);
    ASSERT_TRUE(
        ops().activation.Backward(activation, saved_ref, Bf16Values(dy, DType::kF32), dx_ref).ok());
    for (DType in : kDTypes) {
      for (DType out : kDTypes) {
        const std::string what =
            absl::StrCat(name, " forward ", DTypeName(in), " -> ", DTypeName(out));
        Tensor y = Uninitialized(shape, out);
        ASSERT_TRUE(ops().activation.Forward(activation, Bf16Values(x, in), y).ok()) << what;
        EXPECT_EQ(ValuesOf(y, false), ValuesOf(y_ref, out == DType::kBF16)) << what;
        for (DType grad : kDTypes) {
          const std::string back = absl::StrCat(name, " backward saved ", DTypeName(in), ", dy ",
                                                DTypeName(grad), " -> dx ", DTypeName(out));
          Tensor dx = Uninitialized(shape, out);
          ASSERT_TRUE(
              ops()
                  .activation
                  .Backward(activation, Bf16Values(saved_values, in), Bf16Values(dy, grad), dx)
                  .ok())
              << back;
          EXPECT_EQ(ValuesOf(dx, false), ValuesOf(dx_ref, out == DType::kBF16)) << back;
        }
      }
    }
  }
}

// SwiGLU's operands may be bf16 too: the bits of the f32 call on the widened inputs, each bf16
// output rounded from it, for every mix of dtypes.
TEST_P(ActivationOpsTest, SwiGluBf16OperandsGiveTheF32CallsBitsRounded) {
  constexpr int64_t kCount = 700;
  const Shape shape{kCount};
  const std::vector<float> gate = TestValues(31, kCount, -6.0f, 6.0f);
  const std::vector<float> up = TestValues(32, kCount, -2.0f, 2.0f);
  const std::vector<float> dy = TestValues(33, kCount);
  Tensor y_ref = Uninitialized(shape);
  ASSERT_TRUE(ops()
                  .activation
                  .SwiGluForward(Bf16Values(gate, DType::kF32), Bf16Values(up, DType::kF32), y_ref)
                  .ok());
  Tensor dgate_ref = Uninitialized(shape);
  Tensor dup_ref = Uninitialized(shape);
  ASSERT_TRUE(ops()
                  .activation
                  .SwiGluBackward(Bf16Values(gate, DType::kF32), Bf16Values(up, DType::kF32),
                                  Bf16Values(dy, DType::kF32), dgate_ref, dup_ref)
                  .ok());
  // Every operand's dtype chosen by one bit of `mix`.
  const auto dtype = [](int mix, int bit) { return (mix >> bit) & 1 ? DType::kBF16 : DType::kF32; };
  for (int mix = 0; mix < 8; ++mix) {
    const std::string what =
        absl::StrCat("forward gate ", DTypeName(dtype(mix, 0)), ", up ", DTypeName(dtype(mix, 1)),
                     " -> ", DTypeName(dtype(mix, 2)));
    Tensor y = Uninitialized(shape, dtype(mix, 2));
    ASSERT_TRUE(
        ops()
            .activation
            .SwiGluForward(Bf16Values(gate, dtype(mix, 0)), Bf16Values(up, dtype(mix, 1)), y)
            .ok())
        << what;
    EXPECT_EQ(ValuesOf(y, false), ValuesOf(y_ref, dtype(mix, 2) == DType::kBF16)) << what;
  }
  for (int mix = 0; mix < 32; ++mix) {
    const std::string what =
        absl::StrCat("backward gate ", DTypeName(dtype(mix, 0)), ", up ", DTypeName(dtype(mix, 1)),
                     ", dy ", DTypeName(dtype(mix, 2)), " -> dgate ", DTypeName(dtype(mix, 3)),
                     ", dup ", DTypeName(dtype(mix, 4)));
    Tensor dgate = Uninitialized(shape, dtype(mix, 3));
    Tensor dup = Uninitialized(shape, dtype(mix, 4));
    ASSERT_TRUE(ops()
                    .activation
                    .SwiGluBackward(Bf16Values(gate, dtype(mix, 0)), Bf16Values(up, dtype(mix, 1)),
                                    Bf16Values(dy, dtype(mix, 2)), dgate, dup)
                    .ok())
        << what;
    EXPECT_EQ(ValuesOf(dgate, false), ValuesOf(dgate_ref, dtype(mix, 3) == DType::kBF16)) << what;
    EXPECT_EQ(ValuesOf(dup, false), ValuesOf(dup_ref, dtype(mix, 4) == DType::kBF16)) << what;
  }
}

TEST_P(ActivationOpsTest, NoElementsIsFine) {
  for (Activation activation : {Activation::kRelu, Activation::kTanh, Activation::kGelu}) {
    Tensor y = Uninitialized(Shape{0, 7});
    EXPECT_TRUE(ops().activation.Forward(activation, Uninitialized(Shape{0, 7}), y).ok());
    Tensor dx = Uninitialized(Shape{0, 7});
    EXPECT_TRUE(
        ops()
            .activation
            .Backward(activation, Uninitialized(Shape{0, 7}), Uninitialized(Shape{0, 7}), dx)
            .ok());
  }
}

// Every backend refuses a value outside the enum (CUDA once ran it as the identity).
TEST_P(ActivationOpsTest, AnUnknownActivationIsInvalidArgument) {
  const auto unknown = static_cast<Activation>(7);
  Tensor y = Uninitialized(Shape{4});
  EXPECT_EQ(ops().activation.Forward(unknown, Uninitialized(Shape{4}), y).code(),
            absl::StatusCode::kInvalidArgument);
  Tensor dx = Uninitialized(Shape{4});
  EXPECT_EQ(ops()
                .activation.Backward(unknown, Uninitialized(Shape{4}), Uninitialized(Shape{4}), dx)
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(ActivationOpsTest, MismatchedSizesOrDtypesAreInvalidArgument) {
  Tensor y = Uninitialized(Shape{5});
  EXPECT_EQ(ops().activation.Forward(Activation::kRelu, Uninitialized(Shape{4}), y).code(),
            absl::StatusCode::kInvalidArgument);
  Tensor y64 = Uninitialized(Shape{4}, DType::kF64);
  EXPECT_EQ(ops().activation.Forward(Activation::kTanh, Uninitialized(Shape{4}), y64).code(),
            absl::StatusCode::kInvalidArgument);
  Tensor dx = Uninitialized(Shape{4});
  EXPECT_EQ(ops()
                .activation
                .Backward(Activation::kGelu, Uninitialized(Shape{4}), Uninitialized(Shape{3}), dx)
                .code(),
            absl::StatusCode::kInvalidArgument);
  Tensor dx_short = Uninitialized(Shape{3});
  EXPECT_EQ(
      ops()
          .activation
          .Backward(Activation::kRelu, Uninitialized(Shape{4}), Uninitialized(Shape{4}), dx_short)
          .code(),
      absl::StatusCode::kInvalidArgument);
}

TEST_P(ActivationOpsTest, SwiGluForwardAndBackwardMatchTheDoubleFormula) {
  constexpr int64_t kN = 390;  // not a multiple of any vector width
  const std::vector<float> gate = TestValues(8, kN, -6.0f, 6.0f);
  const std::vector<float> up = TestValues(9, kN, -2.0f, 2.0f);
  const std::vector<float> dy = TestValues(10, kN);
  std::vector<double> y, dgate, dup;
  for (int64_t i = 0; i < kN; ++i) {
    y.push_back(Silu(gate[i]) * up[i]);
    dgate.push_back(static_cast<double>(dy[i]) * up[i] * SiluDerivative(gate[i]));
    dup.push_back(dy[i] * Silu(gate[i]));
  }
  const Tensor gt = Upload(gate, Shape{3, 130});
  const Tensor ut = Upload(up, Shape{3, 130});
  Tensor yt = Uninitialized(Shape{3, 130});
  ASSERT_TRUE(ops().activation.SwiGluForward(gt, ut, yt).ok());
  ExpectNear(Download(yt), y, kSwiGluRel, kSwiGluAbs, "swiglu y");
  Tensor dgt = Uninitialized(Shape{3, 130});
  Tensor dut = Uninitialized(Shape{3, 130});
  ASSERT_TRUE(ops().activation.SwiGluBackward(gt, ut, Upload(dy, Shape{3, 130}), dgt, dut).ok());
  ExpectNear(Download(dgt), dgate, kSwiGluGradRel, kSwiGluGradAbs, "swiglu dgate");
  ExpectNear(Download(dut), dup, kSwiGluGradRel, kSwiGluGradAbs, "swiglu dup");
}

TEST_P(ActivationOpsTest, SwiGluGradientsMatchCentralDifferencesOfTheForward) {
  constexpr int64_t kN = 24;
  std::vector<float> gate = TestValues(11, kN, -4.0f, 4.0f);
  std::vector<float> up = TestValues(12, kN, -2.0f, 2.0f);
  const std::vector<float> dy = TestValues(13, kN);
  // sum(dy * y) of the backend's forward, in double.
  const auto loss = [&] {
    Tensor y = Uninitialized(Shape{kN});
    const absl::Status status =
        ops().activation.SwiGluForward(Upload(gate, Shape{kN}), Upload(up, Shape{kN}), y);
    EXPECT_TRUE(status.ok()) << status;
    double sum = 0.0;
    const std::vector<float> values = Download(y);
    for (int64_t i = 0; i < kN; ++i) sum += static_cast<double>(dy[i]) * values[i];
    return sum;
  };
  // The slope of the loss in values[i], over the f32 step actually taken.
  const auto slope = [&](std::vector<float>& values, int64_t i) {
    const float original = values[i];
    values[i] = original + static_cast<float>(kFiniteDifferenceStep);
    const float plus = values[i];
    const double loss_plus = loss();
    values[i] = original - static_cast<float>(kFiniteDifferenceStep);
    const float minus = values[i];
    const double loss_minus = loss();
    values[i] = original;
    return (loss_plus - loss_minus) / (static_cast<double>(plus) - minus);
  };
  std::vector<double> dgate_slopes, dup_slopes;
  for (int64_t i = 0; i < kN; ++i) {
    dgate_slopes.push_back(slope(gate, i));
    dup_slopes.push_back(slope(up, i));
  }
  Tensor dgate = Uninitialized(Shape{kN});
  Tensor dup = Uninitialized(Shape{kN});
  ASSERT_TRUE(ops()
                  .activation
                  .SwiGluBackward(Upload(gate, Shape{kN}), Upload(up, Shape{kN}),
                                  Upload(dy, Shape{kN}), dgate, dup)
                  .ok());
  ExpectNear(Download(dgate), dgate_slopes, 0.0, kFiniteDifferenceTol, "dgate vs differences");
  ExpectNear(Download(dup), dup_slopes, 0.0, kFiniteDifferenceTol, "dup vs differences");
}

// exp(-g) overflows f32 for g < -88: silu then goes to -0, never NaN.
TEST_P(ActivationOpsTest, SwiGluOfLargeGatesIsFinite) {
  const std::vector<float> gate = {-100.0f, -30.0f, 30.0f, 100.0f};
  const std::vector<float> up = {2.0f, 2.0f, 2.0f, 2.0f};
  const Tensor gt = Upload(gate, Shape{4});
  const Tensor ut = Upload(up, Shape{4});
  Tensor y = Uninitialized(Shape{4});
  ASSERT_TRUE(ops().activation.SwiGluForward(gt, ut, y).ok());
  std::vector<double> expected_y, expected_dgate, expected_dup;
  for (int64_t i = 0; i < 4; ++i) {
    expected_y.push_back(Silu(gate[i]) * up[i]);
    expected_dgate.push_back(up[i] * SiluDerivative(gate[i]));
    expected_dup.push_back(Silu(gate[i]));
  }
  ExpectNear(Download(y), expected_y, kSwiGluRel, kSwiGluAbs, "swiglu y of large gates");
  Tensor dgate = Uninitialized(Shape{4});
  Tensor dup = Uninitialized(Shape{4});
  const Tensor ones = Upload({1.0f, 1.0f, 1.0f, 1.0f}, Shape{4});
  ASSERT_TRUE(ops().activation.SwiGluBackward(gt, ut, ones, dgate, dup).ok());
  ExpectNear(Download(dgate), expected_dgate, kSwiGluGradRel, kSwiGluGradAbs, "dgate");
  ExpectNear(Download(dup), expected_dup, kSwiGluGradRel, kSwiGluGradAbs, "dup");
}

TEST_P(ActivationOpsTest, SwiGluOfNoElementsIsFine) {
  Tensor y = Uninitialized(Shape{0, 7});
  EXPECT_TRUE(
      ops()
          .activation.SwiGluForward(Uninitialized(Shape{0, 7}), Uninitialized(Shape{0, 7}), y)
          .ok());
  Tensor dgate = Uninitialized(Shape{0, 7});
  Tensor dup = Uninitialized(Shape{0, 7});
  EXPECT_TRUE(ops()
                  .activation
                  .SwiGluBackward(Uninitialized(Shape{0, 7}), Uninitialized(Shape{0, 7}),
                                  Uninitialized(Shape{0, 7}), dgate, dup)
                  .ok());
}

GPIPE_INSTANTIATE_ON_EVERY_BACKEND(ActivationOpsTest);

}  // namespace
}  // namespace gpipe::testing

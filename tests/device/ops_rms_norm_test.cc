// Conformance of RMS norm (NormOps::RmsNorm*) on every backend (see backends_under_test.h):
// forward, the saved rstd, the input and weight gradients against double-precision oracles
// written from the definition (the gradient by the chain rule, not in the kernels' form), the
// gradients against central differences of the backend's own forward, accumulation into dweight,
// rows wider than a GPU block and no rows.
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tests/device/backends_under_test.h"

namespace gpipe::testing {
namespace {

// y = x * rstd * w with |x| <= 1, w in [0.5, 1.5] and rstd ~ sqrt(3): outputs up to ~2.6, from a
// double rstd rounded to f32 and two f32 products: ~3 roundings of 2^-24 relative, ~3e-7 at
// most; 1e-5 leaves room for another backend's order of the double sum of squares.
constexpr double kRmsTol = 1e-5;
// dx combines two terms of size ~3 through f32 products and one difference.
constexpr double kRmsGradTol = 2e-5;
// dweight: double sums over the rows of f32 products dy * (x * rstd), one f32 rounding at the end;
// each term carries ~2 roundings of a value ~3: rows x 3 x 2^-23 ~ 4e-7 per row at most.
constexpr double kRmsParamGradTol = 3e-5;
// Central differences of the f32 forward with a step of 1e-2: the truncation error is
// ~h^2 |d^3 L| ~ 1e-4 and the forward's f32 rounding (~1e-6 over a row) divided by 2h ~ 5e-5;
// a wrong gradient (a dropped term, a wrong sign or scale) is off by 1e-1 or more.
constexpr double kFiniteDifferenceStep = 1e-2;
constexpr double kFiniteDifferenceTol = 1e-3;

struct RmsOracle {
  std::vector<double> y, rstd, dx, dweight;
};

// From the definition: r = (mean(x^2) + eps)^(-1/2), y_j = x_j r w_j, so dy_j/dx_i =
// w_i r [i == j] - x_j w_j r^3 x_i / n and dL/dx_i = r g_i w_i - r^3 x_i / n sum_j g_j w_j x_j;
// dL/dw_j = sum over rows of g_j x_j r.
RmsOracle Oracle(const std::vector<float>& x, const std::vector<float>& w,
                 const std::vector<float>& dy, int64_t rows, int64_t features, double eps) {
  RmsOracle o{std::vector<double>(x.size()), std::vector<double>(rows),
              std::vector<double>(x.size()), std::vector<double>(features, 0.0)};
  const double n = static_cast<double>(features);
  for (int64_t r = 0; r < rows; ++r) {
    double squares = 0.0, g_w_x = 0.0;
    for (int64_t j = 0; j < features; ++j) {
      const int64_t k = r * features + j;
      squares += static_cast<double>(x[k]) * x[k];
      g_w_x += static_cast<double>(dy[k]) * w[j] * x[k];
    }
    const double rstd = 1.0 / std::sqrt(squares / n + eps);
    o.rstd[r] = rstd;
    for (int64_t j = 0; j < features; ++j) {
      const int64_t k = r * features + j;
      o.y[k] = x[k] * rstd * w[j];
      o.dx[k] = rstd * dy[k] * w[j] - rstd * rstd * rstd * x[k] / n * g_w_x;
      o.dweight[j] += static_cast<double>(dy[k]) * x[k] * rstd;
    }
  }
  return o;
}

class RmsNormOpsTest : public OpsConformanceTest {
 protected:
  // sum(dy * y) of the backend's forward, in double.
  double Loss(const std::vector<float>& x, const std::vector<float>& w,
              const std::vector<float>& dy, int64_t rows, int64_t features) {
    const RmsNormArgs args{
        .rows = rows, .features = features, .eps = 1e-6, .weight = Upload(w, Shape{features})};
    Tensor y = Uninitialized(Shape{rows, features});
    Tensor stats = Uninitialized(Shape{rows, kRmsNormStatsPerRow});
    const absl::Status status =
        ops().norm.RmsNormForward(args, Upload(x, Shape{rows, features}), y, stats);
    EXPECT_TRUE(status.ok()) << status;
    const std::vector<float> values = Download(y);
    double loss = 0.0;
    for (size_t k = 0; k < values.size(); ++k) loss += static_cast<double>(dy[k]) * values[k];
    return loss;
  }

  // Central difference of Loss in `values[at]` (x or w), over the f32 step actually taken.
  double Slope(std::vector<float>& values, int64_t at, const std::function<double()>& loss) {
    const float original = values[at];
    values[at] = original + static_cast<float>(kFiniteDifferenceStep);
    const float plus = values[at];
    const double loss_plus = loss();
    values[at] = original - static_cast<float>(kFiniteDifferenceStep);
    const float minus = values[at];
    const double loss_minus = loss();
    values[at] = original;
    return (loss_plus - loss_minus) / (static_cast<double>(plus) - minus);
  }
};

TEST_P(RmsNormOpsTest, ForwardBackwardAndWeightGradientMatchOracle) {
  // 37 features: not a multiple of any vector width; 1037: wider than a 256-thread block.
  for (const int64_t features : {int64_t{37}, int64_t{1037}}) {
    constexpr int64_t kRows = 6;
    const std::string name = "features " + std::to_string(features);
    const std::vector<float> x = TestValues(61, kRows * features);
    const std::vector<float> w = TestValues(62, features, 0.5f, 1.5f);
    const std::vector<float> dy = TestValues(63, kRows * features);
    const RmsNormArgs args{
        .rows = kRows, .features = features, .eps = 1e-6, .weight = Upload(w, Shape{features})};
    RmsOracle expected = Oracle(x, w, dy, kRows, features, args.eps);

    const Tensor xt = Upload(x, Shape{2, 3, features});
    const Tensor dyt = Upload(dy, Shape{2, 3, features});
    Tensor yt = Uninitialized(Shape{2, 3, features});
    Tensor stats = Uninitialized(Shape{kRows, kRmsNormStatsPerRow});
    ASSERT_TRUE(ops().norm.RmsNormForward(args, xt, yt, stats).ok()) << name;
    ExpectNear(Download(yt), expected.y, kRmsTol, kRmsTol, name + ", y");
    // The contract fixes stats' content: the row's rstd rounded to f32.
    ExpectNear(Download(stats), expected.rstd, 1e-6, 0.0, name + ", rstd");

    Tensor dxt = Uninitialized(Shape{2, 3, features});
    ASSERT_TRUE(ops().norm.RmsNormBackwardInput(args, xt, stats, dyt, dxt).ok()) << name;
    ExpectNear(Download(dxt), expected.dx, kRmsGradTol, kRmsGradTol, name + ", dx");

    // Accumulated onto what is there.
    const std::vector<float> dw0 = TestValues(64, features);
    for (int64_t j = 0; j < features; ++j) expected.dweight[j] += dw0[j];
    Tensor dwt = Upload(dw0, Shape{features});
    ASSERT_TRUE(ops().norm.RmsNormBackwardParams(args, xt, stats, dyt, dwt).ok()) << name;
    ExpectNear(Download(dwt), expected.dweight, kRmsParamGradTol, kRmsParamGradTol,
               name + ", dweight");
  }
}

TEST_P(RmsNormOpsTest, GradientsMatchCentralDifferencesOfTheForward) {
  constexpr int64_t kRows = 2, kFeatures = 7;
  std::vector<float> x = TestValues(65, kRows * kFeatures, -2.0f, 2.0f);
  std::vector<float> w = TestValues(66, kFeatures, 0.5f, 1.5f);
  const std::vector<float> dy = TestValues(67, kRows * kFeatures);
  const auto loss = [&] { return Loss(x, w, dy, kRows, kFeatures); };
  std::vector<double> dx_slopes, dw_slopes;
  for (int64_t k = 0; k < kRows * kFeatures; ++k) dx_slopes.push_back(Slope(x, k, loss));
  for (int64_t j = 0; j < kFeatures; ++j) dw_slopes.push_back(Slope(w, j, loss));

  const RmsNormArgs args{
      .rows = kRows, .features = kFeatures, .eps = 1e-6, .weight = Upload(w, Shape{kFeatures})};
  const Tensor xt = Upload(x, Shape{kRows, kFeatures});
  const Tensor dyt = Upload(dy, Shape{kRows, kFeatures});
  Tensor y = Uninitialized(Shape{kRows, kFeatures});
  Tensor stats = Uninitialized(Shape{kRows, kRmsNormStatsPerRow});
  ASSERT_TRUE(ops().norm.RmsNormForward(args, xt, y, stats).ok());
  Tensor dx = Uninitialized(Shape{kRows, kFeatures});
  ASSERT_TRUE(ops().norm.RmsNormBackwardInput(args, xt, stats, dyt, dx).ok());
  Tensor dw = Zeros(Shape{kFeatures});
  ASSERT_TRUE(ops().norm.RmsNormBackwardParams(args, xt, stats, dyt, dw).ok());
  ExpectNear(Download(dx), dx_slopes, 0.0, kFiniteDifferenceTol, "dx vs central differences");
  ExpectNear(Download(dw), dw_slopes, 0.0, kFiniteDifferenceTol, "dweight vs central differences");
}

TEST_P(RmsNormOpsTest, NoRowsIsFineAndLeavesTheWeightGradient) {
  constexpr int64_t kFeatures = 5;
  const RmsNormArgs args{.rows = 0,
                         .features = kFeatures,
                         .eps = 1e-6,
                         .weight = Upload(TestValues(68, kFeatures), Shape{kFeatures})};
  const Tensor x = Uninitialized(Shape{0, kFeatures});
  Tensor y = Uninitialized(Shape{0, kFeatures});
  Tensor stats = Uninitialized(Shape{0, kRmsNormStatsPerRow});
  EXPECT_TRUE(ops().norm.RmsNormForward(args, x, y, stats).ok());
  Tensor dx = Uninitialized(Shape{0, kFeatures});
  EXPECT_TRUE(ops().norm.RmsNormBackwardInput(args, x, stats, x, dx).ok());
  const std::vector<float> dw0 = TestValues(69, kFeatures);
  Tensor dw = Upload(dw0, Shape{kFeatures});
  EXPECT_TRUE(ops().norm.RmsNormBackwardParams(args, x, stats, x, dw).ok());
  ExpectNear(Download(dw), std::vector<double>(dw0.begin(), dw0.end()), 0.0, 0.0, "dweight");
}

GPIPE_INSTANTIATE_ON_EVERY_BACKEND(RmsNormOpsTest);

}  // namespace
}  // namespace gpipe::testing

// Conformance of the conv ops family on every backend (see backends_under_test.h): convolution
// forward and both backward halves against direct double loops over the definition, in f32 and
// at ProductPrecision::kBF16 (against the loops on bf16-rounded operands), pooling
// (max tie, padding and NaN rules; average with and without the padding in the divisor) and
// global average pooling, accumulate semantics, batch 0 and shape errors.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/core/bf16.h"
#include "tests/device/backends_under_test.h"

namespace gpipe::testing {
namespace {

// A float sum of `terms` products of values in [-1, 1]: each addition rounds by at most 2^-24
// of a partial sum bounded by `terms`, so the error stays under terms^2 * 2^-24 (e.g. 3e-5 for
// 27 terms, 1.2e-3 for the 144 of the wide geometry); in practice it is near sqrt(terms) *
// 2^-24 * terms. Backends may order the sums differently (blocked kernels, GEMM tiling), so no
// bit-exactness is asked.
double SumTolerance(int64_t terms) {
  return static_cast<double>(terms) * static_cast<double>(terms) * std::ldexp(1.0, -24);
}
constexpr double kConvRelTol = 1e-5;
// Average pools sum at most 9 floats in [-1, 1] and divide once: a few float roundings.
constexpr double kPoolTol = 1e-6;
// Max pooling selects an input value: exact (its backward adds in float where windows overlap
// on a winner, so it gets kPoolTol).
constexpr double kExact = 0.0;
constexpr ProductPrecision kF32 = ProductPrecision::kF32;
constexpr ProductPrecision kBF16 = ProductPrecision::kBF16;

Conv2dGeometry MakeGeometry(int64_t batch, int64_t in_c, int64_t in_h, int64_t in_w, int64_t out_c,
                            int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                            int64_t dh, int64_t dw, int64_t groups) {
  Conv2dGeometry g{.batch = batch,
                   .in_channels = in_c,
                   .in_h = in_h,
                   .in_w = in_w,
                   .out_channels = out_c,
                   .kernel_h = kh,
                   .kernel_w = kw,
                   .stride_h = sh,
                   .stride_w = sw,
                   .padding_h = ph,
                   .padding_w = pw,
                   .dilation_h = dh,
                   .dilation_w = dw,
                   .groups = groups};
  g.out_h = (in_h + 2 * ph - dh * (kh - 1) - 1) / sh + 1;
  g.out_w = (in_w + 2 * pw - dw * (kw - 1) - 1) / sw + 1;
  return g;
}

// The geometries every convolution test runs: plain 3x3 "same", stride + padding + dilation +
// groups, 1x1, asymmetric everything with 3 groups, and depthwise.
std::vector<std::pair<std::string, Conv2dGeometry>> Geometries() {
  return {
      {"3x3 pad 1", MakeGeometry(2, 3, 6, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1)},
      {"stride 2, pad 1, dilation 2, groups 2",
       MakeGeometry(2, 4, 9, 8, 6, 3, 3, 2, 2, 1, 1, 2, 2, 2)},
      {"1x1", MakeGeometry(2, 5, 4, 3, 7, 1, 1, 1, 1, 0, 0, 1, 1, 1)},
      {"3x2 kernel, stride 2x1, pad 1x0, dilation 1x2, groups 3",
       MakeGeometry(2, 6, 7, 8, 3, 3, 2, 2, 1, 1, 0, 1, 2, 3)},
      {"depthwise 3x3 stride 2", MakeGeometry(2, 4, 7, 7, 4, 3, 3, 2, 2, 1, 1, 1, 1, 4)},
      {"6 channels per group", MakeGeometry(2, 12, 7, 7, 4, 3, 3, 1, 1, 0, 0, 1, 1, 2)},
      // Wide enough for the CPU backend's blocked layouts (reorders in and out).
      {"wide 16 -> 32, 3x3 pad 1", MakeGeometry(2, 16, 5, 6, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1)},
      {"wide grouped 32 -> 32, stride 2", MakeGeometry(2, 32, 7, 7, 32, 3, 3, 2, 2, 1, 1, 1, 1, 2)},
  };
}

// Products summed per output, input-gradient and weight-gradient element.
int64_t ForwardTerms(const Conv2dGeometry& g) {
  return g.in_channels / g.groups * g.kernel_h * g.kernel_w + 1;  // + the bias
}
int64_t InputGradTerms(const Conv2dGeometry& g) {
  return g.out_channels / g.groups * g.kernel_h * g.kernel_w;
}
int64_t WeightGradTerms(const Conv2dGeometry& g) {
  return g.batch * g.out_h * g.out_w + 1;  // + the accumulated value
}

Shape InputShape(const Conv2dGeometry& g) { return {g.batch, g.in_channels, g.in_h, g.in_w}; }
Shape OutputShape(const Conv2dGeometry& g) { return {g.batch, g.out_channels, g.out_h, g.out_w}; }
Shape WeightShape(const Conv2dGeometry& g) {
  return {g.out_channels, g.in_channels / g.groups, g.kernel_h, g.kernel_w};
}

// Calls f(n, o, c, ci, oh, ow, i, j, ih, iw) for every tap of the convolution that lands inside
// the input: output (n, o, oh, ow) reads input (n, c, ih, iw) with weight (o, ci, i, j).
template <typename F>
void ForEachTap(const Conv2dGeometry& g, F f) {
  const int64_t in_per_group = g.in_channels / g.groups;
  const int64_t out_per_group = g.out_channels / g.groups;
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t o = 0; o < g.out_channels; ++o) {
      const int64_t group = o / out_per_group;
      for (int64_t ci = 0; ci < in_per_group; ++ci) {
        const int64_t c = group * in_per_group + ci;
        for (int64_t oh = 0; oh < g.out_h; ++oh) {
          for (int64_t ow = 0; ow < g.out_w; ++ow) {
            for (int64_t i = 0; i < g.kernel_h; ++i) {
              for (int64_t j = 0; j < g.kernel_w; ++j) {
                const int64_t ih = oh * g.stride_h - g.padding_h + i * g.dilation_h;
                const int64_t iw = ow * g.stride_w - g.padding_w + j * g.dilation_w;
                if (ih < 0 || ih >= g.in_h || iw < 0 || iw >= g.in_w) continue;
                f(n, o, c, ci, oh, ow, i, j, ih, iw);
              }
            }
          }
        }
      }
    }
  }
}

int64_t InIndex(const Conv2dGeometry& g, int64_t n, int64_t c, int64_t h, int64_t w) {
  return ((n * g.in_channels + c) * g.in_h + h) * g.in_w + w;
}
int64_t OutIndex(const Conv2dGeometry& g, int64_t n, int64_t o, int64_t h, int64_t w) {
  return ((n * g.out_channels + o) * g.out_h + h) * g.out_w + w;
}
int64_t WeightIndex(const Conv2dGeometry& g, int64_t o, int64_t ci, int64_t i, int64_t j) {
  return ((o * (g.in_channels / g.groups) + ci) * g.kernel_h + i) * g.kernel_w + j;
}

std::vector<double> ConvOracle(const Conv2dGeometry& g, const std::vector<float>& x,
                               const std::vector<float>& w, const std::vector<float>* bias) {
  std::vector<double> y(OutputShape(g).num_elements(), 0.0);
  if (bias != nullptr) {
    for (int64_t n = 0; n < g.batch; ++n) {
      for (int64_t o = 0; o < g.out_channels; ++o) {
        for (int64_t p = 0; p < g.out_h * g.out_w; ++p) {
          y[OutIndex(g, n, o, 0, 0) + p] = (*bias)[o];
        }
      }
    }
  }
  ForEachTap(g, [&](int64_t n, int64_t o, int64_t c, int64_t ci, int64_t oh, int64_t ow, int64_t i,
                    int64_t j, int64_t ih, int64_t iw) {
    y[OutIndex(g, n, o, oh, ow)] +=
        static_cast<double>(x[InIndex(g, n, c, ih, iw)]) * w[WeightIndex(g, o, ci, i, j)];
  });
  return y;
}

// dx of the convolution: dy correlated back through the weights.
std::vector<double> InputGradOracle(const Conv2dGeometry& g, const std::vector<float>& w,
                                    const std::vector<float>& dy) {
  std::vector<double> dx(InputShape(g).num_elements(), 0.0);
  ForEachTap(g, [&](int64_t n, int64_t o, int64_t c, int64_t ci, int64_t oh, int64_t ow, int64_t i,
                    int64_t j, int64_t ih, int64_t iw) {
    dx[InIndex(g, n, c, ih, iw)] +=
        static_cast<double>(dy[OutIndex(g, n, o, oh, ow)]) * w[WeightIndex(g, o, ci, i, j)];
  });
  return dx;
}

// dw0 + the weight gradient.
std::vector<double> WeightGradOracle(const Conv2dGeometry& g, const std::vector<float>& x,
                                     const std::vector<float>& dy, const std::vector<float>& dw0) {
  std::vector<double> dw(dw0.begin(), dw0.end());
  ForEachTap(g, [&](int64_t n, int64_t o, int64_t c, int64_t ci, int64_t oh, int64_t ow, int64_t i,
                    int64_t j, int64_t ih, int64_t iw) {
    dw[WeightIndex(g, o, ci, i, j)] +=
        static_cast<double>(dy[OutIndex(g, n, o, oh, ow)]) * x[InIndex(g, n, c, ih, iw)];
  });
  return dw;
}

// db0 + the per-channel sums of dy.
std::vector<double> BiasGradOracle(const Conv2dGeometry& g, const std::vector<float>& dy,
                                   const std::vector<float>& db0) {
  std::vector<double> db(db0.begin(), db0.end());
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t o = 0; o < g.out_channels; ++o) {
      for (int64_t p = 0; p < g.out_h * g.out_w; ++p) db[o] += dy[OutIndex(g, n, o, 0, 0) + p];
    }
  }
  return db;
}

// Test values with exact bf16 ties up front (halfway between two bf16 values: round to nearest
// even goes down for the first two, up for the last two), so a backend that truncates, or rounds
// ties away from zero, disagrees with the oracle by a whole bf16 step of those products.
std::vector<float> WithBf16Ties(std::vector<float> values) {
  const float ties[] = {1.0f + 0x1p-8f, -(0.5f + 0x1p-9f), 1.0f + 3 * 0x1p-8f, -(0.75f + 0x1p-9f)};
  for (size_t i = 0; i < std::size(ties) && i < values.size(); ++i) values[i] = ties[i];
  return values;
}

std::vector<float> RoundedToBf16(std::vector<float> values) {
  for (float& v : values) v = RoundToBf16(v);
  return values;
}

// The largest difference between `actual` and `unrounded` (the f32 oracle): a bf16 product must
// differ from it clearly somewhere, or it did not round its operands.
double LargestDifference(const std::vector<float>& actual, const std::vector<double>& unrounded) {
  double largest = 0.0;
  for (size_t i = 0; i < actual.size(); ++i) {
    largest = std::max(largest, std::abs(actual[i] - unrounded[i]));
  }
  return largest;
}

class ConvOpsTest : public OpsConformanceTest {};

TEST_P(ConvOpsTest, ForwardMatchesDirectOracleWithAndWithoutBias) {
  for (const auto& [name, g] : Geometries()) {
    const std::vector<float> x = TestValues(1, InputShape(g).num_elements());
    const std::vector<float> w = TestValues(2, WeightShape(g).num_elements());
    const std::vector<float> b = TestValues(3, g.out_channels);
    const Tensor xt = Upload(x, InputShape(g));
    const Tensor wt = Upload(w, WeightShape(g));
    Tensor y = Uninitialized(OutputShape(g));
    ASSERT_TRUE(ops().conv.Conv2dForward(g, kF32, xt, wt, Upload(b, Shape{g.out_channels}), y).ok())
        << name;
    const double tolerance = SumTolerance(ForwardTerms(g));
    ExpectNear(Download(y), ConvOracle(g, x, w, &b), kConvRelTol, tolerance, name + ", bias");
    ASSERT_TRUE(ops().conv.Conv2dForward(g, kF32, xt, wt, Tensor(), y).ok()) << name;
    ExpectNear(Download(y), ConvOracle(g, x, w, nullptr), kConvRelTol, tolerance,
               name + ", no bias");
  }
}

TEST_P(ConvOpsTest, BackwardInputMatchesOracleAndOverwrites) {
  for (const auto& entry : Geometries()) {
    // Named, not bound: clang 14 (the sanitizer build) cannot capture structured bindings.
    const auto& name = entry.first;
    const auto& g = entry.second;
    const std::vector<float> w = TestValues(4, WeightShape(g).num_elements());
    const std::vector<float> dy = TestValues(5, OutputShape(g).num_elements());
    const std::vector<double> expected = InputGradOracle(g, w, dy);
    // Garbage in dx must not leak into the result.
    Tensor dx = Upload(TestValues(6, InputShape(g).num_elements(), 100.0f, 200.0f), InputShape(g));
    ASSERT_TRUE(
        ops()
            .conv
            .Conv2dBackwardInput(g, kF32, Upload(w, WeightShape(g)), Upload(dy, OutputShape(g)), dx)
            .ok())
        << name;
    ExpectNear(Download(dx), expected, kConvRelTol, SumTolerance(InputGradTerms(g)), name);
  }
}

TEST_P(ConvOpsTest, BackwardParamsAccumulatesWeightAndBiasGradients) {
  for (const auto& entry : Geometries()) {
    const auto& name = entry.first;
    const auto& g = entry.second;
    const std::vector<float> x = TestValues(7, InputShape(g).num_elements());
    const std::vector<float> dy = TestValues(8, OutputShape(g).num_elements());
    const std::vector<float> dw0 = TestValues(9, WeightShape(g).num_elements());
    const std::vector<float> db0 = TestValues(10, g.out_channels);
    std::vector<double> dw_expected = WeightGradOracle(g, x, dy, dw0);
    const std::vector<double> db_expected = BiasGradOracle(g, dy, db0);
    const Tensor xt = Upload(x, InputShape(g));
    const Tensor dyt = Upload(dy, OutputShape(g));
    Tensor dw = Upload(dw0, WeightShape(g));
    Tensor db = Upload(db0, Shape{g.out_channels});
    ASSERT_TRUE(ops().conv.Conv2dBackwardParams(g, kF32, xt, dyt, dw, db).ok()) << name;
    const double tolerance = SumTolerance(WeightGradTerms(g));
    ExpectNear(Download(dw), dw_expected, kConvRelTol, tolerance, name + ", dweight");
    // The bias gradient is summed in double and rounded once.
    ExpectNear(Download(db), db_expected, 1e-7, 1e-7, name + ", dbias");

    // Without a bias gradient only dweight accumulates (a second time).
    Tensor no_bias;
    ASSERT_TRUE(ops().conv.Conv2dBackwardParams(g, kF32, xt, dyt, dw, no_bias).ok()) << name;
    for (size_t i = 0; i < dw_expected.size(); ++i) dw_expected[i] += dw_expected[i] - dw0[i];
    ExpectNear(Download(dw), dw_expected, kConvRelTol, 2 * tolerance, name + ", dweight twice");
  }
}

// Mixed precision: every geometry's three products at ProductPrecision::kBF16 agree with the
// loops on bf16-rounded operands (products exact, f32 accumulation) as tightly as f32 ones do
// with theirs, and clearly differ from the unrounded result; the bias and its gradient are not
// rounded (the bias gradient sums dy as given).
TEST_P(ConvOpsTest, Bf16ConvolutionsRoundTheirOperandsAndAccumulateInF32) {
  for (const auto& entry : Geometries()) {
    const auto& name = entry.first;
    const auto& g = entry.second;
    const std::vector<float> x = WithBf16Ties(TestValues(21, InputShape(g).num_elements()));
    const std::vector<float> w = WithBf16Ties(TestValues(22, WeightShape(g).num_elements()));
    const std::vector<float> b = TestValues(23, g.out_channels);
    const std::vector<float> dy = WithBf16Ties(TestValues(24, OutputShape(g).num_elements()));
    const std::vector<float> dw0 = TestValues(25, WeightShape(g).num_elements());
    const std::vector<float> db0 = TestValues(26, g.out_channels);
    const std::vector<float> rx = RoundedToBf16(x), rw = RoundedToBf16(w), rdy = RoundedToBf16(dy);
    const Tensor xt = Upload(x, InputShape(g));
    const Tensor wt = Upload(w, WeightShape(g));
    const Tensor dyt = Upload(dy, OutputShape(g));

    Tensor y = Uninitialized(OutputShape(g));
    ASSERT_TRUE(
        ops().conv.Conv2dForward(g, kBF16, xt, wt, Upload(b, Shape{g.out_channels}), y).ok())
        << name;
    ExpectNear(Download(y), ConvOracle(g, rx, rw, &b), kConvRelTol, SumTolerance(ForwardTerms(g)),
               name + ", bf16 forward");
    EXPECT_GT(LargestDifference(Download(y), ConvOracle(g, x, w, &b)), 1e-4)
        << name << ": the bf16 forward matches the unrounded one";

    Tensor dx = Upload(TestValues(27, InputShape(g).num_elements(), 100.0f, 200.0f), InputShape(g));
    ASSERT_TRUE(ops().conv.Conv2dBackwardInput(g, kBF16, wt, dyt, dx).ok()) << name;
    ExpectNear(Download(dx), InputGradOracle(g, rw, rdy), kConvRelTol,
               SumTolerance(InputGradTerms(g)), name + ", bf16 input gradient");
    EXPECT_GT(LargestDifference(Download(dx), InputGradOracle(g, w, dy)), 1e-4)
        << name << ": the bf16 input gradient matches the unrounded one";

    Tensor dw = Upload(dw0, WeightShape(g));
    Tensor db = Upload(db0, Shape{g.out_channels});
    ASSERT_TRUE(ops().conv.Conv2dBackwardParams(g, kBF16, xt, dyt, dw, db).ok()) << name;
    ExpectNear(Download(dw), WeightGradOracle(g, rx, rdy, dw0), kConvRelTol,
               SumTolerance(WeightGradTerms(g)), name + ", bf16 weight gradient");
    EXPECT_GT(LargestDifference(Download(dw), WeightGradOracle(g, x, dy, dw0)), 1e-4)
        << name << ": the bf16 weight gradient matches the unrounded one";
    ExpectNear(Download(db), BiasGradOracle(g, dy, db0), 1e-7, 1e-7, name + ", bias gradient");
  }
}

TEST_P(ConvOpsTest, BatchZeroDoesNothing) {
  const Conv2dGeometry g = MakeGeometry(0, 3, 5, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1);
  const Tensor x = Uninitialized(InputShape(g));
  const Tensor w = Upload(TestValues(11, WeightShape(g).num_elements()), WeightShape(g));
  Tensor y = Uninitialized(OutputShape(g));
  EXPECT_TRUE(ops().conv.Conv2dForward(g, kF32, x, w, Tensor(), y).ok());
  Tensor dx = Uninitialized(InputShape(g));
  EXPECT_TRUE(ops().conv.Conv2dBackwardInput(g, kF32, w, y, dx).ok());
  const std::vector<float> dw0 = TestValues(12, WeightShape(g).num_elements());
  Tensor dw = Upload(dw0, WeightShape(g));
  Tensor db = Zeros(Shape{g.out_channels});
  EXPECT_TRUE(ops().conv.Conv2dBackwardParams(g, kF32, x, y, dw, db).ok());
  EXPECT_TRUE(ops().conv.Conv2dForward(g, kBF16, x, w, Tensor(), y).ok());
  EXPECT_TRUE(ops().conv.Conv2dBackwardInput(g, kBF16, w, y, dx).ok());
  EXPECT_TRUE(ops().conv.Conv2dBackwardParams(g, kBF16, x, y, dw, db).ok());
  ExpectNear(Download(dw), std::vector<double>(dw0.begin(), dw0.end()), 0.0, 0.0, "dweight");
  ExpectNear(Download(db), std::vector<double>(g.out_channels, 0.0), 0.0, 0.0, "dbias");
}

TEST_P(ConvOpsTest, ShapeMismatchesAreInvalidArgument) {
  const Conv2dGeometry g = MakeGeometry(2, 4, 6, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 2);
  const Tensor x = Zeros(InputShape(g));
  const Tensor w = Zeros(WeightShape(g));
  Tensor y = Zeros(OutputShape(g));
  const Tensor wrong_w = Zeros(Shape{4, 4, 3, 3});  // ignores the groups
  EXPECT_EQ(ops().conv.Conv2dForward(g, kF32, x, wrong_w, Tensor(), y).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ops().conv.Conv2dForward(g, kBF16, x, wrong_w, Tensor(), y).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ops().conv.Conv2dForward(g, kF32, x, w, Zeros(Shape{3}), y).code(),
            absl::StatusCode::kInvalidArgument);
  Conv2dGeometry bad_out = g;
  bad_out.out_h += 1;
  Tensor big_y = Zeros(OutputShape(bad_out));
  EXPECT_EQ(ops().conv.Conv2dForward(bad_out, kF32, x, w, Tensor(), big_y).code(),
            absl::StatusCode::kInvalidArgument);
  Conv2dGeometry bad_groups = g;
  bad_groups.groups = 3;
  EXPECT_EQ(ops().conv.Conv2dForward(bad_groups, kF32, x, w, Tensor(), y).code(),
            absl::StatusCode::kInvalidArgument);
  Tensor dx = Zeros(Shape{2, 4, 6, 5});
  EXPECT_EQ(ops().conv.Conv2dBackwardInput(g, kF32, w, y, dx).code(),
            absl::StatusCode::kInvalidArgument);
  Tensor dw = Zeros(WeightShape(g));
  Tensor db = Zeros(Shape{5});
  EXPECT_EQ(ops().conv.Conv2dBackwardParams(g, kF32, x, y, dw, db).code(),
            absl::StatusCode::kInvalidArgument);
}

// ---- Pooling

Conv2dGeometry PoolGeometry(int64_t batch, int64_t c, int64_t in_h, int64_t in_w, int64_t k,
                            int64_t stride, int64_t padding, int64_t dilation) {
  return MakeGeometry(batch, c, in_h, in_w, c, k, k, stride, stride, padding, padding, dilation,
                      dilation, 1);
}

struct PoolOracle {
  std::vector<double> y;
  std::vector<double> dx;
};

// Per window: the first maximum (row-major) or the first NaN wins; padding is left out. The
// average divides by the kernel area (include_pad) or by the taps inside the input.
PoolOracle Pool(PoolKind kind, const Conv2dGeometry& g, const std::vector<float>& x,
                const std::vector<float>& dy) {
  PoolOracle out{std::vector<double>(OutputShape(g).num_elements()),
                 std::vector<double>(InputShape(g).num_elements(), 0.0)};
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t c = 0; c < g.in_channels; ++c) {
      for (int64_t oh = 0; oh < g.out_h; ++oh) {
        for (int64_t ow = 0; ow < g.out_w; ++ow) {
          std::vector<int64_t> taps;
          for (int64_t i = 0; i < g.kernel_h; ++i) {
            for (int64_t j = 0; j < g.kernel_w; ++j) {
              const int64_t ih = oh * g.stride_h - g.padding_h + i * g.dilation_h;
              const int64_t iw = ow * g.stride_w - g.padding_w + j * g.dilation_w;
              if (ih >= 0 && ih < g.in_h && iw >= 0 && iw < g.in_w) {
                taps.push_back(InIndex(g, n, c, ih, iw));
              }
            }
          }
          const int64_t o = OutIndex(g, n, c, oh, ow);
          if (kind == PoolKind::kMax) {
            int64_t best = taps[0];
            for (int64_t t : taps) {
              if (std::isnan(x[best])) break;
              if (std::isnan(x[t]) || x[t] > x[best]) best = t;
            }
            out.y[o] = x[best];
            out.dx[best] += dy[o];
            continue;
          }
          const double divisor = kind == PoolKind::kAvg
                                     ? static_cast<double>(g.kernel_h * g.kernel_w)
                                     : static_cast<double>(taps.size());
          double sum = 0.0;
          for (int64_t t : taps) sum += x[t];
          out.y[o] = sum / divisor;
          for (int64_t t : taps) out.dx[t] += dy[o] / divisor;
        }
      }
    }
  }
  return out;
}

std::vector<std::pair<std::string, Conv2dGeometry>> PoolGeometries() {
  return {{"2x2 stride 2", PoolGeometry(2, 3, 6, 6, 2, 2, 0, 1)},
          {"3x3 stride 2 pad 1", PoolGeometry(2, 2, 7, 6, 3, 2, 1, 1)},
          {"3x3 stride 1 pad 1 dilation 2", PoolGeometry(1, 2, 7, 7, 3, 1, 1, 2)},
          {"3x3 stride 3 (floor mode drops the last row)", PoolGeometry(1, 2, 8, 8, 3, 3, 0, 1)}};
}

class PoolOpsTest : public OpsConformanceTest {
 protected:
  void Check(PoolKind kind, const Conv2dGeometry& g, const std::vector<float>& x,
             const std::string& name, double tolerance, double grad_tolerance = kPoolTol) {
    const std::vector<float> dy = TestValues(21, OutputShape(g).num_elements());
    const PoolOracle expected = Pool(kind, g, x, dy);
    const Tensor xt = Upload(x, InputShape(g));
    Tensor y = Uninitialized(OutputShape(g));
    ASSERT_TRUE(ops().conv.Pool2dForward(kind, g, xt, y).ok()) << name;
    ExpectNear(Download(y), expected.y, tolerance, tolerance, name + ", forward");
    Tensor dx = Upload(TestValues(22, InputShape(g).num_elements(), 50.0f, 60.0f), InputShape(g));
    const bool max = kind == PoolKind::kMax;
    ASSERT_TRUE(ops()
                    .conv
                    .Pool2dBackward(kind, g, max ? xt : Tensor(), max ? y : Tensor(),
                                    Upload(dy, OutputShape(g)), dx)
                    .ok())
        << name;
    ExpectNear(Download(dx), expected.dx, grad_tolerance, grad_tolerance, name + ", backward");
  }
};

TEST_P(PoolOpsTest, MaxPoolMatchesOracle) {
  for (const auto& [name, g] : PoolGeometries()) {
    Check(PoolKind::kMax, g, TestValues(20, InputShape(g).num_elements()), name, kExact);
  }
}

TEST_P(PoolOpsTest, MaxPoolTiesGoToTheFirstMaximumAndPaddingNeverWins) {
  // All-negative input: a padded window's maximum is an input value, never the zero padding.
  // Values in {-1, -2} make every window tie; the first maximum in row-major order wins.
  const Conv2dGeometry g = PoolGeometry(1, 1, 5, 5, 3, 2, 1, 1);
  std::vector<float> x(25);
  for (int i = 0; i < 25; ++i) x[i] = (i % 3 == 0) ? -1.0f : -2.0f;
  Check(PoolKind::kMax, g, x, "ties", kExact);
}

TEST_P(PoolOpsTest, MaxPoolPropagatesNan) {
  const Conv2dGeometry g = PoolGeometry(1, 1, 4, 4, 2, 2, 0, 1);
  std::vector<float> x = TestValues(23, 16);
  x[5] = std::numeric_limits<float>::quiet_NaN();
  Check(PoolKind::kMax, g, x, "NaN", kExact);
}

TEST_P(PoolOpsTest, AvgPoolIncludingAndExcludingPaddingMatchOracle) {
  for (const auto& [name, g] : PoolGeometries()) {
    const std::vector<float> x = TestValues(24, InputShape(g).num_elements());
    Check(PoolKind::kAvg, g, x, name + ", include pad", kPoolTol);
    Check(PoolKind::kAvgExcludePad, g, x, name + ", exclude pad", kPoolTol);
  }
}

TEST_P(PoolOpsTest, PoolShapeErrorsAreInvalidArgument) {
  const Conv2dGeometry g = PoolGeometry(1, 2, 6, 6, 2, 2, 0, 1);
  const Tensor x = Zeros(InputShape(g));
  Tensor wrong_y = Zeros(Shape{1, 2, 4, 3});
  EXPECT_EQ(ops().conv.Pool2dForward(PoolKind::kMax, g, x, wrong_y).code(),
            absl::StatusCode::kInvalidArgument);
  Conv2dGeometry too_padded = PoolGeometry(1, 2, 6, 6, 2, 1, 0, 1);
  too_padded.padding_h = 2;
  too_padded.out_h = 9;
  Tensor y = Zeros(OutputShape(too_padded));
  EXPECT_EQ(ops().conv.Pool2dForward(PoolKind::kAvgExcludePad, too_padded, x, y).code(),
            absl::StatusCode::kInvalidArgument);
  Tensor dx = Zeros(InputShape(g));
  EXPECT_EQ(
      ops().conv.Pool2dBackward(PoolKind::kMax, g, x, Tensor(), Zeros(OutputShape(g)), dx).code(),
      absl::StatusCode::kInvalidArgument);
}

TEST_P(PoolOpsTest, GlobalAvgPoolMatchesOracle) {
  const Shape shape{3, 4, 5, 6};
  const std::vector<float> x = TestValues(25, shape.num_elements());
  const std::vector<float> dy = TestValues(26, 12);
  std::vector<double> y(12, 0.0), dx(shape.num_elements());
  for (int64_t p = 0; p < 12; ++p) {
    for (int64_t i = 0; i < 30; ++i) y[p] += x[p * 30 + i] / 30.0;
    for (int64_t i = 0; i < 30; ++i) dx[p * 30 + i] = dy[p] / 30.0;
  }
  Tensor yt = Uninitialized(Shape{3, 4});
  ASSERT_TRUE(ops().conv.GlobalAvgPool2dForward(Upload(x, shape), yt).ok());
  // A double sum rounded once to float.
  ExpectNear(Download(yt), y, 1e-7, 1e-7, "forward");
  Tensor dxt = Uninitialized(shape);
  ASSERT_TRUE(ops().conv.GlobalAvgPool2dBackward(Upload(dy, Shape{3, 4}), dxt).ok());
  // One float division.
  ExpectNear(Download(dxt), dx, 1e-7, 0.0, "backward");
  Tensor wrong = Uninitialized(Shape{3, 5});
  EXPECT_EQ(ops().conv.GlobalAvgPool2dForward(Upload(x, shape), wrong).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ops().conv.GlobalAvgPool2dBackward(wrong, dxt).code(),
            absl::StatusCode::kInvalidArgument);
}

GPIPE_INSTANTIATE_ON_EVERY_BACKEND(ConvOpsTest);
GPIPE_INSTANTIATE_ON_EVERY_BACKEND(PoolOpsTest);

}  // namespace
}  // namespace gpipe::testing

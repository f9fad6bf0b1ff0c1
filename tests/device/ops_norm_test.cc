// Conformance of the norm ops family on every backend (see backends_under_test.h): layer norm
// and batch norm forward, backward and parameter gradients against double-precision oracles
// written from the definitions, running-statistics updates, evaluation mode, accumulate
// semantics and shape errors. The stats tensor's layout is the backend's: only its size is
// checked, and backward is always fed the stats its own forward wrote.
#include <cmath>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tests/device/backends_under_test.h"

namespace gpipe::testing {
namespace {

// Normalized outputs have magnitude up to ~3 (xhat of uniform data) and are computed from float
// inputs with double statistics and a final float multiply-add or cast: a few float roundings
// of values of that size, ~1e-6 in practice; 1e-5 leaves room for a backend that keeps the
// float mean pair differently.
constexpr double kNormTol = 1e-5;
// Gradients of the input combine three terms of size ~3 through float (layer norm) or double
// (batch norm) arithmetic: also a few roundings of values around 3.
constexpr double kNormGradTol = 2e-5;
// Parameter gradients are double sums over at most 64 rows added once into float: one
// rounding of the result, but each term is a float product dy * xhat (and layer norm's xhat is
// a float): 64 terms x ~3 x 2^-24 ~ 1e-5.
constexpr double kParamGradTol = 3e-5;

struct RowStats {
  double mean;
  double variance;  // biased
  double rstd;
};

RowStats Stats(const float* x, int64_t n, int64_t stride, int64_t count_per, double eps) {
  // Mean and biased variance of `n` groups of `count_per` consecutive values `stride` apart.
  double sum = 0.0;
  for (int64_t g = 0; g < n; ++g) {
    for (int64_t i = 0; i < count_per; ++i) sum += x[g * stride + i];
  }
  const double count = static_cast<double>(n * count_per);
  const double mean = sum / count;
  double squares = 0.0;
  for (int64_t g = 0; g < n; ++g) {
    for (int64_t i = 0; i < count_per; ++i) {
      squares += (x[g * stride + i] - mean) * (x[g * stride + i] - mean);
    }
  }
  return {mean, squares / count, 1.0 / std::sqrt(squares / count + eps)};
}

// ---- Layer norm

class LayerNormOpsTest : public OpsConformanceTest {
 protected:
  static constexpr int64_t kRows = 6;
  static constexpr int64_t kFeatures = 37;  // not a multiple of any vector width

  LayerNormArgs Args(bool affine) {
    LayerNormArgs args{.rows = kRows, .features = kFeatures, .eps = 1e-5};
    if (affine) {
      args.weight = Upload(TestValues(31, kFeatures, 0.5f, 1.5f), Shape{kFeatures});
      args.bias = Upload(TestValues(32, kFeatures), Shape{kFeatures});
    }
    return args;
  }
};

TEST_P(LayerNormOpsTest, ForwardAndBackwardMatchOracle) {
  for (const bool affine : {false, true}) {
    for (const float offset : {0.0f, 1000.0f}) {
      const std::string name = std::string(affine ? "affine" : "plain") + ", offset " +
                               std::to_string(static_cast<int>(offset));
      const LayerNormArgs args = Args(affine);
      std::vector<float> x = TestValues(33, kRows * kFeatures);
      for (float& v : x) v += offset;
      const std::vector<float> dy = TestValues(34, kRows * kFeatures);
      const std::vector<float> w =
          affine ? Download(args.weight) : std::vector<float>(kFeatures, 1.0f);
      const std::vector<float> b =
          affine ? Download(args.bias) : std::vector<float>(kFeatures, 0.0f);
      std::vector<double> y(x.size()), dx(x.size()), dw(kFeatures, 0.0), db(kFeatures, 0.0);
      for (int64_t r = 0; r < kRows; ++r) {
        const RowStats s = Stats(x.data() + r * kFeatures, 1, 0, kFeatures, args.eps);
        double mean_g = 0.0, mean_gx = 0.0;
        for (int64_t i = 0; i < kFeatures; ++i) {
          const int64_t k = r * kFeatures + i;
          const double xhat = (x[k] - s.mean) * s.rstd;
          y[k] = xhat * w[i] + b[i];
          mean_g += dy[k] * static_cast<double>(w[i]) / kFeatures;
          mean_gx += dy[k] * static_cast<double>(w[i]) * xhat / kFeatures;
          dw[i] += dy[k] * xhat;
          db[i] += dy[k];
        }
        for (int64_t i = 0; i < kFeatures; ++i) {
          const int64_t k = r * kFeatures + i;
          const double xhat = (x[k] - s.mean) * s.rstd;
          dx[k] = s.rstd * (dy[k] * static_cast<double>(w[i]) - mean_g - xhat * mean_gx);
        }
      }
      const Tensor xt = Upload(x, Shape{2, 3, kFeatures});
      const Tensor dyt = Upload(dy, Shape{2, 3, kFeatures});
      Tensor yt = Uninitialized(Shape{2, 3, kFeatures});
      Tensor stats = Uninitialized(Shape{kRows, kLayerNormStatsPerRow});
      ASSERT_TRUE(ops().norm.LayerNormForward(args, xt, yt, stats).ok()) << name;
      ExpectNear(Download(yt), y, kNormTol, kNormTol, name + ", y");
      Tensor dxt = Uninitialized(Shape{2, 3, kFeatures});
      ASSERT_TRUE(ops().norm.LayerNormBackwardInput(args, xt, stats, dyt, dxt).ok()) << name;
      ExpectNear(Download(dxt), dx, kNormGradTol, kNormGradTol, name + ", dx");
      if (!affine) continue;
      // Accumulated onto what is there.
      const std::vector<float> dw0 = TestValues(35, kFeatures);
      const std::vector<float> db0 = TestValues(36, kFeatures);
      for (int64_t i = 0; i < kFeatures; ++i) {
        dw[i] += dw0[i];
        db[i] += db0[i];
      }
      Tensor dwt = Upload(dw0, Shape{kFeatures});
      Tensor dbt = Upload(db0, Shape{kFeatures});
      ASSERT_TRUE(ops().norm.LayerNormBackwardParams(args, xt, stats, dyt, dwt, dbt).ok());
      ExpectNear(Download(dwt), dw, kParamGradTol, kParamGradTol, name + ", dweight");
      ExpectNear(Download(dbt), db, kParamGradTol, kParamGradTol, name + ", dbias");
    }
  }
}

TEST_P(LayerNormOpsTest, UndefinedOutputsAreSkippedAndZeroRowsWork) {
  const LayerNormArgs args = Args(false);
  const Tensor x = Upload(TestValues(37, kRows * kFeatures), Shape{kRows, kFeatures});
  Tensor y = Uninitialized(Shape{kRows, kFeatures});
  Tensor stats = Uninitialized(Shape{kRows, kLayerNormStatsPerRow});
  ASSERT_TRUE(ops().norm.LayerNormForward(args, x, y, stats).ok());
  Tensor none;
  EXPECT_TRUE(ops().norm.LayerNormBackwardInput(args, x, stats, y, none).ok());
  EXPECT_TRUE(ops().norm.LayerNormBackwardParams(args, x, stats, y, none, none).ok());

  LayerNormArgs empty = args;
  empty.rows = 0;
  Tensor x0 = Uninitialized(Shape{0, kFeatures});
  Tensor y0 = Uninitialized(Shape{0, kFeatures});
  Tensor stats0 = Uninitialized(Shape{0, kLayerNormStatsPerRow});
  EXPECT_TRUE(ops().norm.LayerNormForward(empty, x0, y0, stats0).ok());
}

TEST_P(LayerNormOpsTest, ShapeMismatchesAreInvalidArgument) {
  const LayerNormArgs args = Args(true);
  const Tensor x = Zeros(Shape{kRows, kFeatures});
  Tensor y = Zeros(Shape{kRows, kFeatures});
  Tensor stats = Zeros(Shape{kRows, kLayerNormStatsPerRow});
  Tensor short_y = Zeros(Shape{kRows, kFeatures - 1});
  EXPECT_EQ(ops().norm.LayerNormForward(args, x, short_y, stats).code(),
            absl::StatusCode::kInvalidArgument);
  Tensor short_stats = Zeros(Shape{kRows, 2});
  EXPECT_EQ(ops().norm.LayerNormForward(args, x, y, short_stats).code(),
            absl::StatusCode::kInvalidArgument);
  LayerNormArgs wrong_weight = args;
  wrong_weight.weight = Zeros(Shape{kFeatures + 1});
  EXPECT_EQ(ops().norm.LayerNormForward(wrong_weight, x, y, stats).code(),
            absl::StatusCode::kInvalidArgument);
  Tensor dw = Zeros(Shape{kFeatures - 1});
  Tensor db = Zeros(Shape{kFeatures});
  EXPECT_EQ(ops().norm.LayerNormBackwardParams(args, x, stats, y, dw, db).code(),
            absl::StatusCode::kInvalidArgument);
}

// ---- Batch norm

class BatchNormOpsTest : public OpsConformanceTest {
 protected:
  static constexpr int64_t kBatch = 4;
  static constexpr int64_t kChannels = 3;
  static constexpr int64_t kPositions = 10;
  static constexpr int64_t kElements = kBatch * kChannels * kPositions;

  BatchNormArgs Args(bool affine) {
    BatchNormArgs args{.batch = kBatch,
                       .channels = kChannels,
                       .positions = kPositions,
                       .eps = 1e-5,
                       .momentum = 0.1};
    if (affine) {
      args.weight = Upload(TestValues(41, kChannels, 0.5f, 1.5f), Shape{kChannels});
      args.bias = Upload(TestValues(42, kChannels), Shape{kChannels});
    }
    return args;
  }

  // The statistics of channel c over batch and positions.
  RowStats ChannelStats(const std::vector<float>& x, int64_t c, double eps) {
    return Stats(x.data() + c * kPositions, kBatch, kChannels * kPositions, kPositions, eps);
  }
};

TEST_P(BatchNormOpsTest, TrainForwardBackwardAndRunningStatisticsMatchOracle) {
  for (const bool affine : {false, true}) {
    const std::string name = affine ? "affine" : "plain";
    const BatchNormArgs args = Args(affine);
    const std::vector<float> x = TestValues(43, kElements, -2.0f, 3.0f);
    const std::vector<float> dy = TestValues(44, kElements);
    const std::vector<float> w =
        affine ? Download(args.weight) : std::vector<float>(kChannels, 1.0f);
    const std::vector<float> b = affine ? Download(args.bias) : std::vector<float>(kChannels, 0.0f);
    const std::vector<float> mean0 = TestValues(45, kChannels);
    const std::vector<float> var0 = TestValues(46, kChannels, 0.5f, 2.0f);
    std::vector<double> y(kElements), dx(kElements), dw(kChannels), db(kChannels);
    std::vector<double> running_mean(kChannels), running_var(kChannels);
    const double n = kBatch * kPositions;
    for (int64_t c = 0; c < kChannels; ++c) {
      const RowStats s = ChannelStats(x, c, args.eps);
      running_mean[c] = 0.9 * mean0[c] + 0.1 * s.mean;
      running_var[c] = 0.9 * var0[c] + 0.1 * s.variance * n / (n - 1);
      double sum_g = 0.0, sum_gx = 0.0;
      for (int64_t bi = 0; bi < kBatch; ++bi) {
        for (int64_t p = 0; p < kPositions; ++p) {
          const int64_t k = (bi * kChannels + c) * kPositions + p;
          const double xhat = (x[k] - s.mean) * s.rstd;
          y[k] = xhat * w[c] + b[c];
          sum_g += dy[k];
          sum_gx += dy[k] * xhat;
        }
      }
      dw[c] = sum_gx;
      db[c] = sum_g;
      for (int64_t bi = 0; bi < kBatch; ++bi) {
        for (int64_t p = 0; p < kPositions; ++p) {
          const int64_t k = (bi * kChannels + c) * kPositions + p;
          const double xhat = (x[k] - s.mean) * s.rstd;
          dx[k] = w[c] * s.rstd * (dy[k] - sum_g / n - xhat * sum_gx / n);
        }
      }
    }
    const Shape shape{kBatch, kChannels, 2, 5};
    const Tensor xt = Upload(x, shape);
    Tensor mean_t = Upload(mean0, Shape{kChannels});
    Tensor var_t = Upload(var0, Shape{kChannels});
    Tensor yt = Uninitialized(shape);
    Tensor stats = Uninitialized(Shape{kChannels, kBatchNormStatsPerChannel});
    ASSERT_TRUE(ops().norm.BatchNormTrainForward(args, xt, mean_t, var_t, true, yt, stats).ok());
    ExpectNear(Download(yt), y, kNormTol, kNormTol, name + ", y");
    // Running statistics: one float rounding of a double blend.
    ExpectNear(Download(mean_t), running_mean, 1e-6, 1e-7, name + ", running_mean");
    ExpectNear(Download(var_t), running_var, 1e-6, 1e-7, name + ", running_var");

    // A replayed forward (update_running false) leaves the buffers alone and computes the same.
    const std::vector<float> mean_after = Download(mean_t);
    const std::vector<float> var_after = Download(var_t);
    ASSERT_TRUE(ops().norm.BatchNormTrainForward(args, xt, mean_t, var_t, false, yt, stats).ok());
    ExpectNear(Download(mean_t), std::vector<double>(mean_after.begin(), mean_after.end()), 0.0,
               0.0, name + ", running_mean unchanged");
    ExpectNear(Download(var_t), std::vector<double>(var_after.begin(), var_after.end()), 0.0, 0.0,
               name + ", running_var unchanged");

    const std::vector<float> dw0 = TestValues(47, kChannels);
    const std::vector<float> db0 = TestValues(48, kChannels);
    for (int64_t c = 0; c < kChannels; ++c) {
      dw[c] += dw0[c];
      db[c] += db0[c];
    }
    Tensor dxt = Uninitialized(shape);
    Tensor dwt = Upload(dw0, Shape{kChannels});
    Tensor dbt = Upload(db0, Shape{kChannels});
    Tensor none;
    ASSERT_TRUE(ops()
                    .norm
                    .BatchNormBackward(args, xt, stats, Upload(dy, shape), dxt, affine ? dwt : none,
                                       affine ? dbt : none)
                    .ok());
    ExpectNear(Download(dxt), dx, kNormGradTol, kNormGradTol, name + ", dx");
    if (affine) {
      ExpectNear(Download(dwt), dw, kParamGradTol, kParamGradTol, name + ", dweight");
      ExpectNear(Download(dbt), db, kParamGradTol, kParamGradTol, name + ", dbias");
    }
  }
}

TEST_P(BatchNormOpsTest, BackwardHalvesMatchTheWholeBackward) {
  const BatchNormArgs args = Args(true);
  const Shape shape{kBatch, kChannels, kPositions};
  const Tensor x = Upload(TestValues(49, kElements), shape);
  const Tensor dy = Upload(TestValues(50, kElements), shape);
  Tensor mean = Zeros(Shape{kChannels});
  Tensor var = Zeros(Shape{kChannels});
  Tensor y = Uninitialized(shape);
  Tensor stats = Uninitialized(Shape{kChannels, kBatchNormStatsPerChannel});
  ASSERT_TRUE(ops().norm.BatchNormTrainForward(args, x, mean, var, true, y, stats).ok());
  Tensor dx_all = Uninitialized(shape);
  Tensor dw_all = Zeros(Shape{kChannels});
  Tensor db_all = Zeros(Shape{kChannels});
  ASSERT_TRUE(ops().norm.BatchNormBackward(args, x, stats, dy, dx_all, dw_all, db_all).ok());
  Tensor none;
  Tensor dx = Uninitialized(shape);
  ASSERT_TRUE(ops().norm.BatchNormBackward(args, x, stats, dy, dx, none, none).ok());
  Tensor dw = Zeros(Shape{kChannels});
  Tensor db = Zeros(Shape{kChannels});
  ASSERT_TRUE(ops().norm.BatchNormBackward(args, x, stats, dy, none, dw, db).ok());
  const auto as_double = [](const std::vector<float>& v) {
    return std::vector<double>(v.begin(), v.end());
  };
  // Bit-identical: the halves are the same arithmetic.
  ExpectNear(Download(dx), as_double(Download(dx_all)), 0.0, 0.0, "dx");
  ExpectNear(Download(dw), as_double(Download(dw_all)), 0.0, 0.0, "dweight");
  ExpectNear(Download(db), as_double(Download(db_all)), 0.0, 0.0, "dbias");
}

TEST_P(BatchNormOpsTest, EvalForwardUsesRunningStatistics) {
  for (const bool affine : {false, true}) {
    const BatchNormArgs args = Args(affine);
    const std::vector<float> x = TestValues(51, kElements, -2.0f, 2.0f);
    const std::vector<float> mean = TestValues(52, kChannels);
    const std::vector<float> var = TestValues(53, kChannels, 0.5f, 2.0f);
    const std::vector<float> w =
        affine ? Download(args.weight) : std::vector<float>(kChannels, 1.0f);
    const std::vector<float> b = affine ? Download(args.bias) : std::vector<float>(kChannels, 0.0f);
    std::vector<double> y(kElements);
    for (int64_t k = 0; k < kElements; ++k) {
      const int64_t c = (k / kPositions) % kChannels;
      y[k] = (x[k] - mean[c]) / std::sqrt(static_cast<double>(var[c]) + args.eps) * w[c] + b[c];
    }
    const Shape shape{kBatch, kChannels, kPositions};
    Tensor yt = Uninitialized(shape);
    ASSERT_TRUE(ops()
                    .norm
                    .BatchNormEvalForward(args, Upload(x, shape), Upload(mean, {kChannels}),
                                          Upload(var, {kChannels}), yt)
                    .ok());
    ExpectNear(Download(yt), y, kNormTol, kNormTol, affine ? "affine" : "plain");
  }
}

TEST_P(BatchNormOpsTest, OneValuePerChannelAndShapeMismatchesAreInvalidArgument) {
  BatchNormArgs single = Args(false);
  single.batch = 1;
  single.positions = 1;
  const Tensor x1 = Zeros(Shape{1, kChannels});
  Tensor y1 = Zeros(Shape{1, kChannels});
  Tensor mean = Zeros(Shape{kChannels});
  Tensor var = Zeros(Shape{kChannels});
  Tensor stats = Zeros(Shape{kChannels, kBatchNormStatsPerChannel});
  EXPECT_EQ(ops().norm.BatchNormTrainForward(single, x1, mean, var, true, y1, stats).code(),
            absl::StatusCode::kInvalidArgument);

  const BatchNormArgs args = Args(true);
  const Tensor x = Zeros(Shape{kBatch, kChannels, kPositions});
  Tensor y = Zeros(Shape{kBatch, kChannels, kPositions});
  Tensor short_mean = Zeros(Shape{kChannels - 1});
  EXPECT_EQ(ops().norm.BatchNormTrainForward(args, x, short_mean, var, true, y, stats).code(),
            absl::StatusCode::kInvalidArgument);
  Tensor short_y = Zeros(Shape{kBatch, kChannels, kPositions - 1});
  EXPECT_EQ(ops().norm.BatchNormEvalForward(args, x, mean, var, short_y).code(),
            absl::StatusCode::kInvalidArgument);
  Tensor short_stats = Zeros(Shape{kChannels, 2});
  Tensor none;
  EXPECT_EQ(ops().norm.BatchNormBackward(args, x, short_stats, y, y, none, none).code(),
            absl::StatusCode::kInvalidArgument);
}

GPIPE_INSTANTIATE_ON_EVERY_BACKEND(LayerNormOpsTest);
GPIPE_INSTANTIATE_ON_EVERY_BACKEND(BatchNormOpsTest);

}  // namespace
}  // namespace gpipe::testing

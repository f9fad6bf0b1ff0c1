// Conformance of the loss ops family on every backend (see backends_under_test.h): softmax
// cross-entropy and mean squared error, their gradients, and what they add into the device
// totals, against double-precision formulas.
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "runtime/device/ops/bad_id.h"
#include "tests/device/backends_under_test.h"

namespace gpipe::testing {
namespace {

using ::testing::StartsWith;

// The gradients are computed in double and rounded once to float: half an ulp (2^-24
// relative) plus a floor for entries that are (nearly) zero.
constexpr double kGradRel = 1e-7;
constexpr double kGradAbs = 1e-10;
// The totals are double sums of exp/log terms in double (the same terms in the same order as
// the oracle's on the CPU; another backend's exp/log may differ in the last bits): 1e-12 of
// the sum is far above double rounding and far below any error that matters.
constexpr double kTotalsRel = 1e-12;
constexpr double kTotalsAbs = 1e-12;

struct SoftmaxOracle {
  std::vector<double> grad;
  double loss_sum = 0.0;
  int64_t correct = 0;
};

// Plain log-softmax in double per row; argmax with ties to the lowest class.
SoftmaxOracle SoftmaxCrossEntropyOracle(const std::vector<float>& logits,
                                        const std::vector<int64_t>& ids, int64_t classes,
                                        double scale) {
  SoftmaxOracle oracle;
  for (size_t r = 0; r < ids.size(); ++r) {
    const float* row = logits.data() + r * classes;
    double max = row[0];
    int64_t argmax = 0;
    for (int64_t c = 1; c < classes; ++c) {
      if (row[c] > max) {
        max = row[c];
        argmax = c;
      }
    }
    double sum = 0.0;
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(row[c] - max);
    const double lse = max + std::log(sum);
    oracle.loss_sum += lse - row[ids[r]];
    for (int64_t c = 0; c < classes; ++c) {
      oracle.grad.push_back((std::exp(row[c] - lse) - (c == ids[r] ? 1.0 : 0.0)) * scale);
    }
    oracle.correct += argmax == ids[r] ? 1 : 0;
  }
  return oracle;
}

void ExpectTotalsNear(const std::vector<double>& actual, const std::vector<double>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], kTotalsAbs + kTotalsRel * std::fabs(expected[i]))
        << "totals[" << i << "]";
  }
}

class LossOpsTest : public OpsConformanceTest {};

TEST_P(LossOpsTest, SoftmaxCrossEntropyAddsLossAndCorrectIntoTheTotals) {
  constexpr int64_t kRows = 6;
  constexpr int64_t kClasses = 5;
  const std::vector<float> logits = TestValues(1, kRows * kClasses, -3.0f, 3.0f);
  const std::vector<int64_t> ids = {0, 4, 2, 2, 1, 3};
  const double scale = 1.0 / 8.0;
  Tensor grad = Uninitialized(Shape{2, 3, kClasses});
  // Totals accumulate: they start non-zero.
  Tensor totals = UploadF64({1.5, 2.0}, Shape{kLossTotalsSize});
  ASSERT_TRUE(ops()
                  .loss
                  .SoftmaxCrossEntropy(Upload(logits, Shape{2, 3, kClasses}),
                                       UploadIds(ids, Shape{2, 3}), scale, grad, totals)
                  .ok());
  const SoftmaxOracle oracle = SoftmaxCrossEntropyOracle(logits, ids, kClasses, scale);
  ExpectNear(Download(grad), oracle.grad, kGradRel, kGradAbs, "grad");
  ExpectTotalsNear(DownloadF64(totals),
                   {1.5 + scale * oracle.loss_sum, 2.0 + static_cast<double>(oracle.correct)});
}

TEST_P(LossOpsTest, SoftmaxCrossEntropyIsStableForHugeLogits) {
  const std::vector<float> logits = {1000.0f, 1002.0f, 999.0f, -1000.0f, 0.0f, 1000.0f};
  const std::vector<int64_t> ids = {0, 2};
  Tensor grad = Uninitialized(Shape{2, 3});
  Tensor totals = Zeros(Shape{kLossTotalsSize}, DType::kF64);
  ASSERT_TRUE(ops()
                  .loss
                  .SoftmaxCrossEntropy(Upload(logits, Shape{2, 3}), UploadIds(ids, Shape{2}), 0.5,
                                       grad, totals)
                  .ok());
  const SoftmaxOracle oracle = SoftmaxCrossEntropyOracle(logits, ids, 3, 0.5);
  ExpectNear(Download(grad), oracle.grad, kGradRel, kGradAbs, "grad");
  ExpectTotalsNear(DownloadF64(totals), {0.5 * oracle.loss_sum, 1.0});
}

TEST_P(LossOpsTest, ArgmaxTiesGoToTheLowestClass) {
  // Both rows tie classes 0 and 2; only the row whose id is 0 counts as correct.
  const std::vector<float> logits = {2.0f, 1.0f, 2.0f, 2.0f, 1.0f, 2.0f};
  Tensor grad = Uninitialized(Shape{2, 3});
  Tensor totals = Zeros(Shape{kLossTotalsSize}, DType::kF64);
  ASSERT_TRUE(ops()
                  .loss
                  .SoftmaxCrossEntropy(Upload(logits, Shape{2, 3}), UploadIds({0, 2}, Shape{2}),
                                       1.0, grad, totals)
                  .ok());
  EXPECT_EQ(DownloadF64(totals)[kLossCorrect], 1.0);
}

// Rows as wide as a language model's vocabulary (GPT-2's, padded: 50304 classes): the row max,
// the argmax (a tie far apart goes to the lower class), the log-sum-exp and every gradient entry
// against the oracle; the class ids include the first and last class.
TEST_P(LossOpsTest, SoftmaxCrossEntropyOfVocabularyWideRowsMatchesTheOracle) {
  constexpr int64_t kRows = 6;
  constexpr int64_t kClasses = 50304;
  std::vector<float> logits = TestValues(12, kRows * kClasses, -4.0f, 4.0f);
  // Row 1 ties classes 300 and 40000 at its maximum; row 2's maximum is its last class.
  logits[1 * kClasses + 300] = 9.0f;
  logits[1 * kClasses + 40000] = 9.0f;
  logits[2 * kClasses + kClasses - 1] = 9.0f;
  const std::vector<int64_t> ids = {0, 300, kClasses - 1, 40000, 12345, kClasses - 1};
  const double scale = 1.0 / 24.0;
  Tensor grad = Uninitialized(Shape{2, 3, kClasses});
  Tensor totals = UploadF64({0.25, 1.0}, Shape{kLossTotalsSize});
  ASSERT_TRUE(ops()
                  .loss
                  .SoftmaxCrossEntropy(Upload(logits, Shape{2, 3, kClasses}),
                                       UploadIds(ids, Shape{2, 3}), scale, grad, totals)
                  .ok());
  const SoftmaxOracle oracle = SoftmaxCrossEntropyOracle(logits, ids, kClasses, scale);
  EXPECT_EQ(oracle.correct, 2) << "rows 1 and 2 predict their ids";
  ExpectNear(Download(grad), oracle.grad, kGradRel, kGradAbs, "grad");
  ExpectTotalsNear(DownloadF64(totals),
                   {0.25 + scale * oracle.loss_sum, 1.0 + static_cast<double>(oracle.correct)});
}

// Two runs of the same call give the same bits: gradients and totals (the row sums and the sum
// over rows use fixed orders, no atomics). More rows than one grid dimension's blocks (65535).
TEST_P(LossOpsTest, SoftmaxCrossEntropyGivesTheSameBitsEveryRun) {
  for (const auto& [rows, classes] :
       std::vector<std::pair<int64_t, int64_t>>{{70000, 3}, {16, 50304}}) {
    const std::vector<float> logits = TestValues(13, rows * classes, -5.0f, 5.0f);
    std::vector<int64_t> ids(rows);
    for (int64_t r = 0; r < rows; ++r) ids[r] = (r * 7919) % classes;
    std::vector<std::vector<float>> grads;
    std::vector<std::vector<double>> totals;
    for (int run = 0; run < 2; ++run) {
      Tensor grad = Uninitialized(Shape{rows, classes});
      Tensor sums = Zeros(Shape{kLossTotalsSize}, DType::kF64);
      ASSERT_TRUE(ops()
                      .loss
                      .SoftmaxCrossEntropy(Upload(logits, Shape{rows, classes}),
                                           UploadIds(ids, Shape{rows}), 1.0 / rows, grad, sums)
                      .ok());
      grads.push_back(Download(grad));
      totals.push_back(DownloadF64(sums));
    }
    EXPECT_EQ(grads[0], grads[1]) << rows << " rows of " << classes;
    EXPECT_EQ(totals[0], totals[1]) << rows << " rows of " << classes;
    const SoftmaxOracle oracle = SoftmaxCrossEntropyOracle(logits, ids, classes, 1.0 / rows);
    ExpectTotalsNear(totals[0], {oracle.loss_sum / rows, static_cast<double>(oracle.correct)});
  }
}

TEST_P(LossOpsTest, SoftmaxCrossEntropyOfNoRowsAddsNothing) {
  Tensor grad = Uninitialized(Shape{0, 4});
  Tensor totals = UploadF64({3.0, 4.0}, Shape{kLossTotalsSize});
  ASSERT_TRUE(ops()
                  .loss
                  .SoftmaxCrossEntropy(Uninitialized(Shape{0, 4}), UploadIds({}, Shape{0}), 1.0,
                                       grad, totals)
                  .ok());
  ExpectTotalsNear(DownloadF64(totals), {3.0, 4.0});
}

TEST_P(LossOpsTest, SoftmaxCrossEntropyReportsTheFirstClassIdOutOfRange) {
  Tensor grad = Uninitialized(Shape{3, 4});
  Tensor totals = UploadF64({3.0, 4.0}, Shape{kLossTotalsSize});
  const absl::Status returned = ops().loss.SoftmaxCrossEntropy(
      Upload(TestValues(2, 12), Shape{3, 4}), UploadIds({0, 4, -1}, Shape{3}), 1.0, grad, totals);
  const absl::Status status = ReportedBy(returned);
  ASSERT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), StartsWith("row 1 has class id 4"));
  const std::optional<BadId> bad = BadIdOf(status);
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->index, 1);
  EXPECT_EQ(bad->id, 4);
  // Nothing was added, where the op itself said no (reported later, totals are unspecified).
  if (!returned.ok()) ExpectTotalsNear(DownloadF64(totals), {3.0, 4.0});
}

TEST_P(LossOpsTest, SoftmaxCrossEntropyRejectsMismatchedShapes) {
  const Tensor logits = Upload(TestValues(2, 12), Shape{3, 4});
  Tensor grad = Uninitialized(Shape{3, 4});
  Tensor totals = Zeros(Shape{kLossTotalsSize}, DType::kF64);
  EXPECT_EQ(
      ops().loss.SoftmaxCrossEntropy(logits, UploadIds({0, 1}, Shape{2}), 1.0, grad, totals).code(),
      absl::StatusCode::kInvalidArgument);
  Tensor short_grad = Uninitialized(Shape{2, 4});
  EXPECT_EQ(
      ops()
          .loss.SoftmaxCrossEntropy(logits, UploadIds({0, 1, 2}, Shape{3}), 1.0, short_grad, totals)
          .code(),
      absl::StatusCode::kInvalidArgument);
  Tensor f32_totals = Zeros(Shape{kLossTotalsSize});
  EXPECT_EQ(
      ops()
          .loss.SoftmaxCrossEntropy(logits, UploadIds({0, 1, 2}, Shape{3}), 1.0, grad, f32_totals)
          .code(),
      absl::StatusCode::kInvalidArgument);
}

TEST_P(LossOpsTest, MeanSquaredErrorAddsTheScaledSumOfSquares) {
  const std::vector<float> output = TestValues(3, 4 * 7, -2.0f, 2.0f);
  const std::vector<float> targets = TestValues(4, 4 * 7, -2.0f, 2.0f);
  const double scale = 1.0 / (8.0 * 7.0);
  Tensor grad = Uninitialized(Shape{4, 7});
  Tensor totals = UploadF64({0.25, 5.0}, Shape{kLossTotalsSize});
  ASSERT_TRUE(ops()
                  .loss
                  .MeanSquaredError(Upload(output, Shape{4, 7}), Upload(targets, Shape{4, 7}),
                                    scale, grad, totals)
                  .ok());
  std::vector<double> expected_grad;
  double sum = 0.0;
  for (size_t i = 0; i < output.size(); ++i) {
    const double diff = static_cast<double>(output[i]) - targets[i];
    sum += diff * diff;
    expected_grad.push_back(2.0 * diff * scale);
  }
  ExpectNear(Download(grad), expected_grad, kGradRel, kGradAbs, "grad");
  // kLossCorrect is not touched by a regression loss.
  ExpectTotalsNear(DownloadF64(totals), {0.25 + scale * sum, 5.0});
}

TEST_P(LossOpsTest, MeanSquaredErrorOfNoElementsAddsNothing) {
  Tensor grad = Uninitialized(Shape{0, 3});
  Tensor totals = UploadF64({1.0, 0.0}, Shape{kLossTotalsSize});
  ASSERT_TRUE(ops()
                  .loss
                  .MeanSquaredError(Uninitialized(Shape{0, 3}), Uninitialized(Shape{0, 3}), 1.0,
                                    grad, totals)
                  .ok());
  ExpectTotalsNear(DownloadF64(totals), {1.0, 0.0});
}

TEST_P(LossOpsTest, MeanSquaredErrorRejectsMismatchedShapes) {
  Tensor grad = Uninitialized(Shape{2, 3});
  Tensor totals = Zeros(Shape{kLossTotalsSize}, DType::kF64);
  EXPECT_EQ(
      ops().loss.MeanSquaredError(Zeros(Shape{2, 3}), Zeros(Shape{2, 2}), 1.0, grad, totals).code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      ops()
          .loss
          .MeanSquaredError(Zeros(Shape{2, 3}), Zeros(Shape{6}, DType::kF64), 1.0, grad, totals)
          .code(),
      absl::StatusCode::kInvalidArgument);
  Tensor short_totals = Zeros(Shape{1}, DType::kF64);
  EXPECT_EQ(
      ops()
          .loss.MeanSquaredError(Zeros(Shape{2, 3}), Zeros(Shape{2, 3}), 1.0, grad, short_totals)
          .code(),
      absl::StatusCode::kInvalidArgument);
}

GPIPE_INSTANTIATE_ON_EVERY_BACKEND(LossOpsTest);

}  // namespace
}  // namespace gpipe::testing

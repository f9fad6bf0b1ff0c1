// EvalSummary: the evaluation line and record are means over the real held-out samples,
// accumulated batch by batch from the last stage's sums, with accuracy over predictions and
// bits per byte = loss / ln 2.
#include "runtime/coord/eval_summary.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace gpipe {
namespace {

// Reports of a 2-rank evaluation batch: rank 0 (no sums) and the last stage with its sums.
std::vector<pb::StepReport> Batch(double loss_sum, int64_t samples, int64_t correct,
                                  int64_t predictions) {
  std::vector<pb::StepReport> reports(2);
  reports[1].set_eval_loss_sum(loss_sum);
  reports[1].set_eval_samples(samples);
  reports[1].set_correct(correct);
  reports[1].set_eval_predictions(predictions);
  return reports;
}

TEST(EvalSummaryTest, MeansAreOverRealSamplesAndPredictions) {
  EvalSummary summary(/*after_step=*/500, /*bits_per_byte=*/false);
  // Two full batches of 4 and a last batch with 2 real samples (2 padding samples sent nothing).
  ASSERT_TRUE(summary.Add(Batch(2.0, 4, 3, 4)).ok());
  ASSERT_TRUE(summary.Add(Batch(1.0, 4, 4, 4)).ok());
  ASSERT_TRUE(summary.Add(Batch(3.0, 2, 0, 2)).ok());
  EXPECT_EQ(summary.samples(), 10);
  EXPECT_DOUBLE_EQ(summary.loss(), 0.6);
  EXPECT_DOUBLE_EQ(summary.accuracy(), 0.7);
  EXPECT_LT(summary.bits_per_byte(), 0);
  summary.set_elapsed_ms(12.4);
  EXPECT_EQ(summary.FormatLine(),
            "eval after step 500 | loss 0.6000 | acc 70.00% | 10 samples | 12 ms");
  EXPECT_EQ(DumpJson(summary.ToMetricsRecord()),
            "{\"eval\":true,\"step\":500,\"loss\":0.6,\"accuracy\":0.7,\"samples\":10,"
            "\"eval_ms\":12.4}");
}

TEST(EvalSummaryTest, LanguageModelsReportBitsPerByteAndPerPositionAccuracy) {
  EvalSummary summary(/*after_step=*/3, /*bits_per_byte=*/true);
  // 2 windows of 8 bytes: 16 predictions; each sample's loss is its mean over positions.
  ASSERT_TRUE(summary.Add(Batch(2.0 * std::log(4.0), 2, 4, 16)).ok());
  EXPECT_DOUBLE_EQ(summary.loss(), std::log(4.0));
  EXPECT_DOUBLE_EQ(summary.bits_per_byte(), 2.0);
  EXPECT_DOUBLE_EQ(summary.accuracy(), 0.25);
  EXPECT_NE(summary.FormatLine().find("| 2.000 bits/byte |"), std::string::npos)
      << summary.FormatLine();
}

TEST(EvalSummaryTest, RegressionHasNoAccuracy) {
  EvalSummary summary(1, false);
  std::vector<pb::StepReport> reports(1);
  reports[0].set_eval_loss_sum(0.5);
  reports[0].set_eval_samples(2);
  ASSERT_TRUE(summary.Add(reports).ok());
  EXPECT_DOUBLE_EQ(summary.loss(), 0.25);
  EXPECT_LT(summary.accuracy(), 0);
  EXPECT_EQ(summary.FormatLine().find("acc"), std::string::npos);
}

TEST(EvalSummaryTest, EveryReplicasLastStageAddsItsShare) {
  // 2 stages x 2 replicas: ranks 1 and 3 are the last stages, each with its half of the batch.
  EvalSummary summary(/*after_step=*/10, /*bits_per_byte=*/false);
  std::vector<pb::StepReport> reports(4);
  reports[1].set_eval_loss_sum(2.0);
  reports[1].set_eval_samples(4);
  reports[1].set_correct(1);
  reports[1].set_eval_predictions(4);
  reports[3].set_eval_loss_sum(1.0);
  reports[3].set_eval_samples(2);
  reports[3].set_correct(2);
  reports[3].set_eval_predictions(2);
  ASSERT_TRUE(summary.Add(reports).ok());
  EXPECT_EQ(summary.samples(), 6);
  EXPECT_DOUBLE_EQ(summary.loss(), 0.5);
  EXPECT_DOUBLE_EQ(summary.accuracy(), 0.5);
}

TEST(EvalSummaryTest, ABatchWithoutSumsIsAnError) {
  EvalSummary summary(1, false);
  EXPECT_EQ(summary.Add(std::vector<pb::StepReport>(3)).code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace gpipe

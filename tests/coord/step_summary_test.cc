// Rank 0's summary of one step from every rank's report: with data-parallel replicas the loss
// and the correct predictions add up over the replicas' last stages, the progress line names the
// fullest rank's stage and replica and the slowest all-reduce, and the metrics record lists them;
// the throughput (tokens/s, FLOP/s per rank, MFU) appears in both only where it is known.
#include "runtime/coord/step_summary.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpipe {
namespace {

using ::testing::HasSubstr;

pb::StepReport Report(int rank, int stage, int replica) {
  pb::StepReport report;
  report.set_rank(rank);
  report.set_stage(stage);
  report.set_replica(replica);
  report.set_step(4);
  report.set_step_ms(10);
  report.set_busy_ms(5);
  report.set_peak_bytes(1000 + rank);
  return report;
}

// 2 stages x 2 replicas: rank r * 2 + s.
std::vector<pb::StepReport> TwoByTwo() {
  std::vector<pb::StepReport> reports;
  for (int replica = 0; replica < 2; ++replica) {
    for (int stage = 0; stage < 2; ++stage) {
      pb::StepReport report = Report(replica * 2 + stage, stage, replica);
      report.set_all_reduce_ms(1.0 + replica + stage);
      report.set_all_reduce_exposed_ms(0.25 * (1 + replica));
      reports.push_back(report);
    }
  }
  reports[1].set_loss(0.3);  // replica 0's last stage
  reports[1].set_correct(5);
  reports[3].set_loss(0.2);  // replica 1's
  reports[3].set_correct(6);
  return reports;
}

TEST(StepSummaryTest, ReplicasAddTheirPartsOfTheLossAndTheCorrectPredictions) {
  absl::StatusOr<StepSummary> s = Summarize(4, TwoByTwo(), 16, 20.0, true);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->replicas, 2);
  EXPECT_DOUBLE_EQ(s->loss, 0.5);
  EXPECT_EQ(s->replica_loss, (std::vector<double>{0.3, 0.2}));
  EXPECT_DOUBLE_EQ(s->accuracy, 11.0 / 16.0);
  EXPECT_EQ(s->stage, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(s->replica, (std::vector<int>{0, 0, 1, 1}));
  s->lr = 0.0125;
  const std::string line = FormatProgressLine(*s, 10);
  EXPECT_THAT(line, HasSubstr("| loss 0.5000 | acc 68.8% | lr 1.25e-02 |"));
  EXPECT_THAT(line, HasSubstr("peak mem 1003 B (stage 1, replica 1)"));
  EXPECT_THAT(line, HasSubstr("| 2 replicas, all-reduce 3.00 ms (0.50 ms exposed)"));
  const Json record = ToMetricsRecord(*s);
  EXPECT_EQ(record.at("lr").get<double>(), 0.0125);
  EXPECT_EQ(record.at("replicas").get<int>(), 2);
  EXPECT_EQ(record.at("bytes_sent").get<std::vector<int64_t>>(),
            (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(record.at("replica_loss").get<std::vector<double>>(), (std::vector<double>{0.3, 0.2}));
  EXPECT_EQ(record.at("all_reduce_exposed_ms").get<std::vector<double>>(),
            (std::vector<double>{0.25, 0.25, 0.5, 0.5}));
}

TEST(StepSummaryTest, OneReplicaKeepsTheRecordAndLineAsBefore) {
  std::vector<pb::StepReport> reports = {Report(0, 0, 0), Report(1, 1, 0)};
  reports[1].set_loss(0.7);
  absl::StatusOr<StepSummary> s = Summarize(4, reports, 16, 20.0, true);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_DOUBLE_EQ(s->loss, 0.7);
  EXPECT_THAT(FormatProgressLine(*s, 10), HasSubstr("peak mem 1001 B (stage 1)"));
  EXPECT_THAT(FormatProgressLine(*s, 10), ::testing::Not(HasSubstr("replica")));
  EXPECT_FALSE(ToMetricsRecord(*s).contains("replicas"));
}

TEST(StepSummaryTest, GraphCountsAreListedByRankWhereAnyRankReportedThem) {
  std::vector<pb::StepReport> reports = {Report(0, 0, 0), Report(1, 1, 0)};
  reports[1].set_loss(0.7);
  absl::StatusOr<StepSummary> s = Summarize(4, reports, 16, 20.0, true);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(ToMetricsRecord(*s).contains("graph_launches"));
  // runtime.cuda.graphs: rank 1 replayed 8 instructions, capturing them first; rank 0 none.
  reports[1].set_graph_launches(8);
  reports[1].set_graphs_captured(8);
  s = Summarize(4, reports, 16, 20.0, true);
  ASSERT_TRUE(s.ok()) << s.status();
  const Json record = ToMetricsRecord(*s);
  EXPECT_EQ(record.at("graph_launches").get<std::vector<int64_t>>(), (std::vector<int64_t>{0, 8}));
  EXPECT_EQ(record.at("graphs_captured").get<std::vector<int64_t>>(), (std::vector<int64_t>{0, 8}));
}

TEST(StepSummaryTest, ThroughputShowsTokensTheMeanRanksFlopRateTheBusiestStageAndMfu) {
  std::vector<pb::StepReport> reports = {Report(0, 0, 0), Report(1, 1, 0)};
  reports[1].set_loss(0.7);
  absl::StatusOr<StepSummary> s = Summarize(4, reports, 16, 2000.0, true);
  ASSERT_TRUE(s.ok()) << s.status();
  s->tokens_per_s = 12345;
  s->tflops_per_rank = {1.5, 2.5};
  s->mfu = 0.2;
  const std::string line = FormatProgressLine(*s, 10);
  EXPECT_THAT(line, HasSubstr("| 8 samples/s | 12.3k tok/s | step 2000.00 ms |"));
  EXPECT_THAT(line, HasSubstr("| 2.00 TFLOP/s/rank (max 2.50 TFLOP/s on stage 1) | MFU 20.0% |"));
  const Json record = ToMetricsRecord(*s);
  EXPECT_EQ(record.at("tokens_per_s").get<double>(), 12345.0);
  EXPECT_EQ(record.at("tflops_per_rank").get<std::vector<double>>(),
            (std::vector<double>{1.5, 2.5}));
  EXPECT_EQ(record.at("mfu").get<double>(), 0.2);
  // Even stages name none; rates take the prefix that fits.
  s->tokens_per_s = 950;
  s->tflops_per_rank = {0.0123, 0.0123};
  EXPECT_THAT(FormatProgressLine(*s, 10), HasSubstr("| 950 tok/s |"));
  EXPECT_THAT(FormatProgressLine(*s, 10), HasSubstr("| 12.3 GFLOP/s/rank | MFU 20.0% |"));
  s->tokens_per_s = 1.234e6;
  EXPECT_THAT(FormatProgressLine(*s, 10), HasSubstr("| 1.23M tok/s |"));
}

TEST(StepSummaryTest, WithoutTokensOrAPeakTheLineAndRecordLeaveThemOut) {
  std::vector<pb::StepReport> reports = {Report(0, 0, 0)};
  reports[0].set_loss(0.7);
  absl::StatusOr<StepSummary> s = Summarize(4, reports, 16, 20.0, true);
  ASSERT_TRUE(s.ok()) << s.status();
  s->tflops_per_rank = {3e-6};
  const std::string line = FormatProgressLine(*s, 10);
  EXPECT_THAT(line, HasSubstr("| bubble 50.0% | 3.00 MFLOP/s/rank | peak mem"));
  EXPECT_THAT(line, ::testing::Not(HasSubstr("tok/s")));
  EXPECT_THAT(line, ::testing::Not(HasSubstr("MFU")));
  const Json record = ToMetricsRecord(*s);
  EXPECT_FALSE(record.contains("tokens_per_s"));
  EXPECT_FALSE(record.contains("mfu"));
  EXPECT_EQ(record.at("tflops_per_rank").get<std::vector<double>>(), (std::vector<double>{3e-6}));
}

TEST(StepSummaryTest, AReportNamingAReplicaOutsideTheJobIsAnError) {
  std::vector<pb::StepReport> reports = {Report(0, 0, 0), Report(1, 0, 5)};
  const absl::StatusOr<StepSummary> s = Summarize(4, reports, 16, 20.0, true);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("names replica 5 of a job of 2 ranks"));
}

}  // namespace
}  // namespace gpipe

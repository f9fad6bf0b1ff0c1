// Every training schedule gives the update of single-stage training, in-process (K threads,
// loopback channel): within fp32 rounding of GPipe's order, and bit for bit between the
// schedules whose gradient accumulation order is the same (1F1B, interleaved, zero-bubble all
// accumulate micro-batches 0..M-1 on every stage). EVAL runs forward only.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/exec/pipeline_harness.h"

namespace gpipe {
namespace {

using testing::ExpectSucceeded;
using testing::PipelineRun;
using testing::RunPipeline;

using Weights = std::map<std::string, std::vector<float>>;

// Largest |a-b| / max(|b|, 1e-3) over every element (relative, guarded near zero).
double MaxRelativeDifference(const Weights& a, const Weights& b) {
  double worst = 0;
  for (const auto& [name, values] : b) {
    const std::vector<float>& other = a.at(name);
    EXPECT_EQ(other.size(), values.size()) << name;
    for (size_t i = 0; i < values.size() && i < other.size(); ++i) {
      const double scale = std::max(std::abs(static_cast<double>(values[i])), 1e-3);
      worst = std::max(worst, std::abs(static_cast<double>(other[i]) - values[i]) / scale);
    }
  }
  return worst;
}

struct ScheduleCase {
  std::string schedule;
  int stages;
  int virtual_stages;
  std::string remat;
};

std::string Describe(const ScheduleCase& c) {
  return absl::StrCat(c.schedule, " K=", c.stages, " v=", c.virtual_stages, " remat ", c.remat);
}

PipelineRun RunCase(const ScheduleCase& c) {
  return RunPipeline({.stages = c.stages,
                      .overrides = {absl::StrCat("pipeline { schedule: ", c.schedule,
                                                 " virtual_stages: ", c.virtual_stages,
                                                 " remat: ", c.remat, " }")}});
}

TEST(SchedulesTest, EveryScheduleMatchesSingleStageTraining) {
  const PipelineRun gpipe_one = RunCase({"GPIPE", 1, 1, "NEVER"});
  const PipelineRun in_order_one = RunCase({"ONE_F_ONE_B", 1, 1, "NEVER"});
  ExpectSucceeded(gpipe_one);
  ExpectSucceeded(in_order_one);
  ASSERT_NE(gpipe_one.weights, gpipe_one.initial_weights);
  // GPipe backwards micro-batches M-1..0, 1F1B 0..M-1: the same sums in another order.
  EXPECT_LT(MaxRelativeDifference(in_order_one.weights, gpipe_one.weights), 1e-5);

  std::vector<ScheduleCase> cases;
  for (const char* remat : {"NEVER", "EXCEPT_LAST", "ALWAYS"}) {
    for (int stages : {2, 3}) {
      cases.push_back({"GPIPE", stages, 1, remat});
      cases.push_back({"ONE_F_ONE_B", stages, 1, remat});
      cases.push_back({"ZERO_BUBBLE_H1", stages, 1, remat});
      cases.push_back({"ZERO_BUBBLE_H2", stages, 1, remat});
    }
    // 4 micro-batches: a multiple of 2 stages; 2x2 and 2x3 parts of the 7 layers.
    cases.push_back({"INTERLEAVED_1F1B", 2, 2, remat});
    cases.push_back({"INTERLEAVED_1F1B", 2, 3, remat});
  }
  for (const ScheduleCase& c : cases) {
    SCOPED_TRACE(Describe(c));
    const PipelineRun run = RunCase(c);
    ExpectSucceeded(run);
    const bool fill_drain = c.schedule == "GPIPE";
    // Same accumulation order as the single-stage reference of its kind: bit-identical.
    EXPECT_EQ(run.weights, fill_drain ? gpipe_one.weights : in_order_one.weights);
    EXPECT_LT(MaxRelativeDifference(run.weights, gpipe_one.weights), 1e-5);
    for (int64_t bytes : run.end_transient) EXPECT_EQ(bytes, 0);
  }
}

TEST(SchedulesTest, EvalRunsForwardOnlyAndLeavesWeightsAlone) {
  std::vector<PipelineRun> runs;
  for (int stages : {1, 2, 3}) {
    runs.push_back(RunPipeline({.stages = stages, .eval_after = true}));
    ExpectSucceeded(runs.back());
    EXPECT_GT(runs.back().eval_loss, 0.0);
  }
  // Inference mode is the same arithmetic whatever the partition.
  EXPECT_EQ(runs[1].eval_loss, runs[0].eval_loss);
  EXPECT_EQ(runs[2].eval_loss, runs[0].eval_loss);
  // The EVAL step did not move the weights: they are those of training alone.
  const PipelineRun trained = RunPipeline({.stages = 2});
  ExpectSucceeded(trained);
  EXPECT_EQ(runs[1].weights, trained.weights);
}

}  // namespace
}  // namespace gpipe

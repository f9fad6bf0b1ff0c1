// Every training schedule gives the update of single-stage training, in-process (K threads,
// loopback channel): within fp32 rounding of GPipe's order, and bit for bit between the
// schedules whose gradient accumulation order is the same (1F1B, interleaved, zero-bubble, the V
// schedules all accumulate micro-batches 0..M-1 on every stage). EVAL runs forward only.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
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
    // V placement, two chunks per rank: 2x2 and 3x2 parts of the 7 layers; DUALPIPE_V's phases
    // at K = 2 (M = 2K), its ZERO_BUBBLE_V fallback at K = 3.
    for (int stages : {2, 3}) {
      cases.push_back({"ZERO_BUBBLE_V", stages, 2, remat});
      cases.push_back({"DUALPIPE_V", stages, 2, remat});
    }
  }
  // Where ZB-H2's larger cap (2K-1-s) differs from H1's: more micro-batches than stages.
  const PipelineRun h2 =
      RunPipeline({.stages = 3,
                   .overrides = {"pipeline { schedule: ZERO_BUBBLE_H2 micro_batches: 8 }",
                                 "training { global_batch: 32 }"}});
  const PipelineRun in_order_8 =
      RunPipeline({.stages = 1,
                   .overrides = {"pipeline { schedule: ONE_F_ONE_B micro_batches: 8 }",
                                 "training { global_batch: 32 }"}});
  ExpectSucceeded(h2);
  ExpectSucceeded(in_order_8);
  EXPECT_EQ(h2.weights, in_order_8.weights);
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

// Fewer micro-batches than stages (M = 2 at K = 3), and interleaving with M not a multiple of K
// (M = 5 at K = 2, 3): every schedule still gives single-stage 1F1B's bits.
TEST(SchedulesTest, AnyMicroBatchCountMatchesSingleStageTraining) {
  for (int micro_batches : {2, 5}) {
    const std::string shape = absl::StrCat("micro_batches: ", micro_batches);
    const std::string batch = absl::StrCat("training { global_batch: ", 4 * micro_batches, " }");
    const PipelineRun in_order = RunPipeline(
        {.stages = 1,
         .overrides = {absl::StrCat("pipeline { schedule: ONE_F_ONE_B ", shape, " }"), batch}});
    ExpectSucceeded(in_order);
    for (const char* pipeline :
         {"schedule: ONE_F_ONE_B", "schedule: ZERO_BUBBLE_H1", "schedule: ZERO_BUBBLE_H2",
          "schedule: INTERLEAVED_1F1B virtual_stages: 2", "schedule: ZERO_BUBBLE_V",
          "schedule: DUALPIPE_V"}) {
      for (int stages : {2, 3}) {
        SCOPED_TRACE(absl::StrCat(pipeline, " K=", stages, " M=", micro_batches));
        const std::vector<std::string> overrides = {
            absl::StrCat("pipeline { ", pipeline, " ", shape, " }"), batch};
        const PipelineRun run = RunPipeline({.stages = stages, .overrides = overrides});
        ExpectSucceeded(run);
        EXPECT_EQ(run.weights, in_order.weights);
        // NCCL's matching model too.
        const PipelineRun ordered = RunPipeline({.stages = stages,
                                                 .overrides = overrides,
                                                 .match_in_issue_order = true,
                                                 .wait_seconds = 10});
        ExpectSucceeded(ordered);
        EXPECT_EQ(ordered.weights, in_order.weights);
      }
    }
  }
}

// Under the NCCL channel's matching (per direction between two ranks, in issue order; sends done
// only once their receive is posted) every schedule still runs and gives the same bits: the
// executor issues sends and receives in the program's order, which the verifier checked matches
// on both sides. Interleaved schedules at K = 2 carry both kinds in each direction between the
// same two ranks.
TEST(SchedulesTest, EveryScheduleRunsWhenTransfersMatchInIssueOrder) {
  std::vector<ScheduleCase> cases;
  for (int stages : {2, 3, 4}) {
    for (const char* schedule : {"GPIPE", "ONE_F_ONE_B", "ZERO_BUBBLE_H1", "ZERO_BUBBLE_H2"}) {
      cases.push_back({schedule, stages, 1, "NEVER"});
    }
  }
  cases.push_back({"INTERLEAVED_1F1B", 2, 2, "NEVER"});
  cases.push_back({"INTERLEAVED_1F1B", 2, 3, "EXCEPT_LAST"});
  cases.push_back({"ONE_F_ONE_B", 3, 1, "ALWAYS"});
  cases.push_back({"ZERO_BUBBLE_V", 3, 2, "NEVER"});
  cases.push_back({"DUALPIPE_V", 2, 2, "EXCEPT_LAST"});
  for (const ScheduleCase& c : cases) {
    SCOPED_TRACE(Describe(c));
    const std::vector<std::string> overrides = {absl::StrCat("pipeline { schedule: ", c.schedule,
                                                             " virtual_stages: ", c.virtual_stages,
                                                             " remat: ", c.remat, " }")};
    const PipelineRun by_key = RunPipeline({.stages = c.stages, .overrides = overrides});
    const PipelineRun in_order = RunPipeline({.stages = c.stages,
                                              .overrides = overrides,
                                              .match_in_issue_order = true,
                                              .wait_seconds = 10});
    ExpectSucceeded(by_key);
    ExpectSucceeded(in_order);
    EXPECT_EQ(in_order.weights, by_key.weights);
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
  // Inference mode switches dropout off: before any training (same initial weights), the eval
  // loss with dropout p = 0.2 equals the one with p = 0, and a training-mode forward would not.
  const PipelineRun with_dropout = RunPipeline({.stages = 2, .eval_before = true});
  const PipelineRun without = RunPipeline(
      {.stages = 2,
       // A repeated field in an override replaces the whole list: kPlan's layers, p = 0.
       .overrides = {"model { layers { name: 'fc1' linear { out_features: 16 } } "
                     "layers { name: 'act1' gelu {} } layers { name: 'drop1' dropout { p: 0 } } "
                     "layers { name: 'fc2' linear { out_features: 12 } } "
                     "layers { name: 'norm2' layer_norm {} } layers { name: 'act2' tanh {} } "
                     "layers { name: 'fc3' linear { out_features: 4 } } }"},
       .eval_before = true});
  ExpectSucceeded(with_dropout);
  ExpectSucceeded(without);
  EXPECT_EQ(with_dropout.eval_loss, without.eval_loss);
}

// Programs the verifier would reject, fed to the executor directly: it stops with an error
// that names rank, stage, step and instruction instead of computing a wrong update.
TEST(SchedulesTest, ExecutorRejectsRepeatedOrMisplacedWork) {
  struct Case {
    const char* what;
    std::function<void(schedule::Program&)> edit;
    const char* message;
  };
  auto append_before_end = [](schedule::Instruction instruction) {
    return [instruction](schedule::Program& program) {
      auto& list = program.stage_programs[0].instructions;
      list.insert(list.end() - 2, instruction);  // before AllReduceGrads, OptimizerStep
    };
  };
  const Case cases[] = {
      {"a second BackwardWeight", append_before_end(schedule::BackwardWeight{0, 0}),
       "instruction BackwardWeight(mb=0): the micro-batch already finished on this stage"},
      {"a chunk the stage does not have", append_before_end(schedule::Forward{0, 1}),
       "instruction Forward(mb=0, chunk=1): chunk 1 is outside [0, 1)"},
      {"a second Forward", append_before_end(schedule::Forward{1, 0}),
       "instruction Forward(mb=1): the micro-batch already finished on this stage"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const PipelineRun run = RunPipeline(
        {.stages = 1,
         .overrides = {"pipeline { schedule: ZERO_BUBBLE_H1 }", "training { steps: 1 }"},
         .wait_seconds = 2,
         .edit_program = c.edit});
    ASSERT_FALSE(run.statuses[0].ok());
    EXPECT_TRUE(absl::StrContains(run.statuses[0].message(), "rank 0, stage 0, step 0: "))
        << run.statuses[0];
    EXPECT_TRUE(absl::StrContains(run.statuses[0].message(), c.message)) << run.statuses[0];
  }
  // A whole Backward leaves no weight half to run.
  const PipelineRun whole =
      RunPipeline({.stages = 1,
                   .overrides = {"pipeline { schedule: ONE_F_ONE_B }", "training { steps: 1 }"},
                   .wait_seconds = 2,
                   .edit_program = [](schedule::Program& program) {
                     auto& list = program.stage_programs[0].instructions;
                     // F0 B0 ...: put W0 right after B0, while micro-batch 0 is still... finished.
                     const auto b0 = std::find(list.begin(), list.end(),
                                               schedule::Instruction(schedule::Backward{0, 0}));
                     list.insert(b0 + 1, schedule::BackwardWeight{0, 0});
                   }});
  ASSERT_FALSE(whole.statuses[0].ok());
  EXPECT_TRUE(absl::StrContains(whole.statuses[0].message(),
                                "instruction BackwardWeight(mb=0): the micro-batch already "
                                "finished on this stage"))
      << whole.statuses[0];
}

}  // namespace
}  // namespace gpipe

// runtime.cuda.graphs on the CPU backend, whose recorded ops are the twin of CUDA graphs: the
// second training step captures each (chunk, micro-batch) Forward and Backward and later steps
// replay them, and the weights are bit for bit those of the same run uncaptured, whatever the
// schedule, stage count, re-materialization and precision. Chunks that cannot be replayed
// (dropout, a split backward) run uncaptured beside the others.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "tests/exec/pipeline_harness.h"

namespace gpipe {
namespace {

using testing::ExpectSucceeded;
using testing::PipelineRun;
using testing::RunPipeline;

// kPlan (4 micro-batches) with its dropout at p = 0: no layer depends on the step, so every chunk
// is captured (and the dropout's output is its input itself).
const std::string& PlanWithoutDropout() {
  static const std::string* const plan = new std::string(
      absl::StrReplaceAll(testing::kPlan, {{"dropout { p: 0.2 }", "dropout { p: 0 }"}}));
  return *plan;
}

struct Case {
  std::string schedule;
  int stages = 1;
  int virtual_stages = 1;
  std::string remat = "NEVER";
  std::string precision = "FP32";
  int steps = 4;
};

std::string Describe(const Case& c) {
  return absl::StrCat(c.schedule, " K=", c.stages, " v=", c.virtual_stages, " remat ", c.remat, " ",
                      c.precision, ", ", c.steps, " steps");
}

PipelineRun Train(const Case& c, bool graphs, const char* plan) {
  return RunPipeline(
      {.stages = c.stages,
       .plan = plan,
       .overrides = {
           absl::StrCat("pipeline { schedule: ", c.schedule, " virtual_stages: ", c.virtual_stages,
                        " remat: ", c.remat, " }"),
           absl::StrCat("training { steps: ", c.steps, " precision: ", c.precision, " }"),
           absl::StrCat("runtime { cuda { graphs: ", graphs ? "true" : "false", " } }")}});
}

// Launches a stage's step makes when all its chunks are captured: a Forward and a Backward per
// micro-batch and chunk.
int AllLaunches(const Case& c) { return 2 * 4 * c.virtual_stages; }

TEST(GraphsTest, ReplayedStepsGiveTheUncapturedWeightsBitForBit) {
  std::vector<Case> cases;
  for (const char* remat : {"NEVER", "EXCEPT_LAST", "ALWAYS"}) {
    cases.push_back({.schedule = "GPIPE", .stages = 1, .remat = remat});
    cases.push_back({.schedule = "GPIPE", .stages = 2, .remat = remat});
    cases.push_back({.schedule = "ONE_F_ONE_B", .stages = 3, .remat = remat});
    cases.push_back(
        {.schedule = "INTERLEAVED_1F1B", .stages = 2, .virtual_stages = 2, .remat = remat});
  }
  cases.push_back({.schedule = "ONE_F_ONE_B", .stages = 2, .precision = "BF16"});
  cases.push_back({.schedule = "GPIPE", .stages = 2, .remat = "ALWAYS", .precision = "BF16"});
  for (const Case& c : cases) {
    SCOPED_TRACE(Describe(c));
    const PipelineRun uncaptured = Train(c, /*graphs=*/false, PlanWithoutDropout().c_str());
    const PipelineRun captured = Train(c, /*graphs=*/true, PlanWithoutDropout().c_str());
    ExpectSucceeded(uncaptured);
    ExpectSucceeded(captured);
    ASSERT_NE(uncaptured.weights, uncaptured.initial_weights);
    EXPECT_EQ(captured.weights, uncaptured.weights);
    ASSERT_EQ(captured.last_reports.size(), static_cast<size_t>(c.stages));
    for (const pb::StepReport& report : captured.last_reports) {
      SCOPED_TRACE(absl::StrCat("stage ", report.stage()));
      EXPECT_EQ(report.graph_launches(), AllLaunches(c));
      EXPECT_EQ(report.graphs_captured(), 0);
    }
    for (const pb::StepReport& report : uncaptured.last_reports) {
      EXPECT_FALSE(report.has_graph_launches());
    }
    // The loss the last stage reports comes from the replayed forward (reports come in the
    // order the stages finished).
    const auto last_loss = [&](const PipelineRun& run) {
      for (const pb::StepReport& report : run.last_reports) {
        if (report.stage() == c.stages - 1) return report.loss();
      }
      return -1.0;
    };
    EXPECT_GT(last_loss(uncaptured), 0);
    EXPECT_EQ(last_loss(captured), last_loss(uncaptured));
  }
}

TEST(GraphsTest, TheSecondStepCapturesAndTheFirstRunsUncaptured) {
  const Case c{.schedule = "ONE_F_ONE_B", .stages = 2, .steps = 2};
  const PipelineRun captured = Train(c, /*graphs=*/true, PlanWithoutDropout().c_str());
  ExpectSucceeded(captured);
  EXPECT_EQ(captured.weights, Train(c, /*graphs=*/false, PlanWithoutDropout().c_str()).weights);
  for (const pb::StepReport& report : captured.last_reports) {
    EXPECT_EQ(report.graphs_captured(), AllLaunches(c));
    EXPECT_EQ(report.graph_launches(), AllLaunches(c));
  }
  const PipelineRun first = Train({.schedule = "ONE_F_ONE_B", .stages = 2, .steps = 1},
                                  /*graphs=*/true, PlanWithoutDropout().c_str());
  ExpectSucceeded(first);
  for (const pb::StepReport& report : first.last_reports) {
    EXPECT_EQ(report.graph_launches(), 0);
  }
}

// kPlan's dropout (p = 0.2) keys its masks by the step: its chunk runs uncaptured, the others
// replay, and the weights are still the uncaptured run's.
TEST(GraphsTest, ChunksWhoseWorkDependsOnTheStepRunUncaptured) {
  for (int stages : {1, 3}) {
    const Case c{.schedule = "GPIPE", .stages = stages, .remat = "ALWAYS"};
    SCOPED_TRACE(Describe(c));
    const PipelineRun uncaptured = Train(c, /*graphs=*/false, nullptr);
    const PipelineRun captured = Train(c, /*graphs=*/true, nullptr);
    ExpectSucceeded(uncaptured);
    ExpectSucceeded(captured);
    EXPECT_EQ(captured.weights, uncaptured.weights);
    int replaying = 0;
    for (const pb::StepReport& report : captured.last_reports) {
      EXPECT_TRUE(report.graph_launches() == 0 || report.graph_launches() == AllLaunches(c))
          << report.graph_launches();
      if (report.graph_launches() > 0) ++replaying;
    }
    // One stage holds the dropout.
    EXPECT_EQ(replaying, stages - 1);
  }
}

TEST(GraphsTest, SplitBackwardsRunUncaptured) {
  for (const Case& c : {Case{.schedule = "ZERO_BUBBLE_H1", .stages = 2},
                        Case{.schedule = "ZERO_BUBBLE_V", .stages = 2, .virtual_stages = 2}}) {
    SCOPED_TRACE(Describe(c));
    const PipelineRun uncaptured = Train(c, /*graphs=*/false, PlanWithoutDropout().c_str());
    const PipelineRun captured = Train(c, /*graphs=*/true, PlanWithoutDropout().c_str());
    ExpectSucceeded(uncaptured);
    ExpectSucceeded(captured);
    EXPECT_EQ(captured.weights, uncaptured.weights);
    for (const pb::StepReport& report : captured.last_reports) {
      EXPECT_EQ(report.graph_launches(), 0);
    }
  }
}

// The graphs' memory: blocks a capture frees serve later captures, so re-materialization still
// saves what it saves without graphs, and replaying more steps takes no more memory. (What the
// graphs add is fixed: per captured micro-batch, its stage input and output gradient buffers and
// its output and input gradient, kept at their addresses; docs/gpus.md.)
TEST(GraphsTest, GraphMemoryIsReusedAndDoesNotGrowWithSteps) {
  const auto total = [](const PipelineRun& run, int s) {
    return run.peak_activation[s] + run.peak_boundary[s] + run.peak_boundary_grad[s];
  };
  for (const char* schedule : {"GPIPE", "ONE_F_ONE_B"}) {
    SCOPED_TRACE(schedule);
    const PipelineRun always = Train({.schedule = schedule, .stages = 2, .remat = "ALWAYS"},
                                     /*graphs=*/true, PlanWithoutDropout().c_str());
    const PipelineRun longer =
        Train({.schedule = schedule, .stages = 2, .remat = "ALWAYS", .steps = 8},
              /*graphs=*/true, PlanWithoutDropout().c_str());
    const PipelineRun never = Train({.schedule = schedule, .stages = 2, .remat = "NEVER"},
                                    /*graphs=*/true, PlanWithoutDropout().c_str());
    ExpectSucceeded(always);
    ExpectSucceeded(longer);
    ExpectSucceeded(never);
    for (int s = 0; s < 2; ++s) {
      SCOPED_TRACE(absl::StrCat("stage ", s));
      EXPECT_EQ(total(longer, s), total(always, s));
      // Stage 0 holds several micro-batches between their forward and backward; the last stage
      // of 1F1B runs each backward right after its forward, so it saves nothing by recomputing.
      EXPECT_LE(always.peak_activation[s], never.peak_activation[s]);
      if (s == 0) {
        EXPECT_LT(always.peak_activation[s], never.peak_activation[s]);
      }
    }
  }
}

// A received stage input or output gradient lands in the buffer its graph reads (no copy before
// the launch, no receive buffer of its own): in a replayed step the receiving stage's boundary
// bytes never exceed the graphs' kept buffers, which are all that is left after the run. (Before,
// each receive took a new buffer beside them, at least one micro-batch's more at the peak.)
TEST(GraphsTest, ReceivesLandInTheGraphsInputBuffers) {
  for (const char* schedule : {"GPIPE", "ONE_F_ONE_B"}) {
    SCOPED_TRACE(schedule);
    const PipelineRun run =
        Train({.schedule = schedule, .stages = 2}, /*graphs=*/true, PlanWithoutDropout().c_str());
    ExpectSucceeded(run);
    // Stage 1 receives the activations; stage 0 the gradients.
    EXPECT_GT(run.end_boundary[1], 0);
    EXPECT_EQ(run.peak_boundary[1], run.end_boundary[1]);
    EXPECT_GT(run.end_boundary_grad[0], 0);
    EXPECT_EQ(run.peak_boundary_grad[0], run.end_boundary_grad[0]);
    // The same weights as uncaptured, as ever.
    const PipelineRun plain =
        Train({.schedule = schedule, .stages = 2}, /*graphs=*/false, PlanWithoutDropout().c_str());
    ExpectSucceeded(plain);
    EXPECT_EQ(run.weights, plain.weights);
  }
}

}  // namespace
}  // namespace gpipe

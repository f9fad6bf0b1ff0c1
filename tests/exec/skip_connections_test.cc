// Skip connections across stages (skip_add, skip_concat), in-process (K threads, loopback
// channel): a model whose skips span 1, 2 and 3 stages (one output read by three joins, so the
// gradient sum order matters) trains to single-stage training's bits under every schedule,
// re-materialization policy, placement and NCCL's matching model; its memory is what
// PredictActivationMemory says; and EVAL runs it forward only.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "layers/registry.h"
#include "runtime/estimate/activation_memory.h"
#include "runtime/plan/plan_analysis.h"
#include "runtime/plan/plan_loader.h"
#include "runtime/plan/plan_program.h"
#include "tests/exec/pipeline_harness.h"

namespace gpipe {
namespace {

using testing::ExpectSucceeded;
using testing::PipelineRun;
using testing::RunPipeline;

// act1 feeds add1 (the next part), cat1 (two parts on) and add3 (three parts on) with the
// boundaries below at K = 4; fc3 feeds add2 across one boundary.
constexpr char kModel[] =
    "model { input { shape: [6] } "
    "layers { name: 'fc1' linear { out_features: 8 } } "
    "layers { name: 'act1' gelu {} } "
    "layers { name: 'fc2' linear { out_features: 8 } } "
    "layers { name: 'add1' skip_add { from: 'act1' } } "
    "layers { name: 'act2' tanh {} } "
    "layers { name: 'fc3' linear { out_features: 8 } } "
    "layers { name: 'cat1' skip_concat { from: 'act1' } } "
    "layers { name: 'fc4' linear { out_features: 8 } } "
    "layers { name: 'add2' skip_add { from: 'fc3' } } "
    "layers { name: 'add3' skip_add { from: 'act1' } } "
    "layers { name: 'act3' relu {} } "
    "layers { name: 'head' linear { out_features: 4 } } "
    "loss { softmax_cross_entropy {} } }";

// Parts at K stages: [fc1 act1] [fc2 add1] [act2 fc3 cat1] [fc4 add2 add3 act3 head] for K = 4.
std::string Boundaries(int parts) {
  switch (parts) {
    case 2:
      return "boundaries: ['act2']";
    case 3:
      return "boundaries: ['fc2', 'fc4']";
    case 4:
      return "boundaries: ['fc2', 'act2', 'fc4']";
    default:
      return "";
  }
}

PipelineRun RunSkips(int stages, const std::string& pipeline, bool issue_order = false,
                     bool eval_after = false) {
  return RunPipeline({.stages = stages,
                      .overrides = {kModel, absl::StrCat("pipeline { ", pipeline, " }")},
                      .match_in_issue_order = issue_order,
                      .wait_seconds = 10,
                      .eval_after = eval_after});
}

TEST(SkipConnectionsTest, EveryStageCountScheduleAndRematGivesSingleStageBits) {
  const PipelineRun gpipe_one = RunSkips(1, "schedule: GPIPE");
  const PipelineRun in_order_one = RunSkips(1, "schedule: ONE_F_ONE_B");
  ExpectSucceeded(gpipe_one);
  ExpectSucceeded(in_order_one);
  ASSERT_NE(gpipe_one.weights, gpipe_one.initial_weights);
  for (const auto& [name, values] : gpipe_one.weights) {
    EXPECT_NE(values, gpipe_one.initial_weights.at(name)) << name << " never trained";
  }
  for (const char* remat : {"NEVER", "EXCEPT_LAST", "ALWAYS"}) {
    for (int stages : {2, 3, 4}) {
      for (const char* schedule : {"GPIPE", "ONE_F_ONE_B", "ZERO_BUBBLE_H1", "ZERO_BUBBLE_H2"}) {
        const std::string pipeline =
            absl::StrCat("schedule: ", schedule, " remat: ", remat, " ", Boundaries(stages));
        SCOPED_TRACE(absl::StrCat(pipeline, " K=", stages));
        const PipelineRun run = RunSkips(stages, pipeline);
        ExpectSucceeded(run);
        EXPECT_EQ(run.weights,
                  std::string(schedule) == "GPIPE" ? gpipe_one.weights : in_order_one.weights);
        for (int64_t bytes : run.end_transient) EXPECT_EQ(bytes, 0);
      }
    }
    // Two chunks per stage: looped (part 0 and 2 on stage 0) and V (parts 0 and 3 on stage 0,
    // so add3's input is a local hand-off).
    for (const char* pipeline : {"schedule: INTERLEAVED_1F1B virtual_stages: 2",
                                 "schedule: ZERO_BUBBLE_V", "schedule: DUALPIPE_V"}) {
      const std::string full = absl::StrCat(pipeline, " remat: ", remat, " ", Boundaries(4));
      SCOPED_TRACE(full);
      const PipelineRun run = RunSkips(2, full);
      ExpectSucceeded(run);
      EXPECT_EQ(run.weights, in_order_one.weights);
      for (int64_t bytes : run.end_transient) EXPECT_EQ(bytes, 0);
    }
  }
}

TEST(SkipConnectionsTest, NcclMatchingModelGivesTheSameBits) {
  const PipelineRun reference = RunSkips(1, "schedule: ONE_F_ONE_B");
  ExpectSucceeded(reference);
  for (const auto& [stages, pipeline] :
       std::vector<std::pair<int, std::string>>{{2, "schedule: ONE_F_ONE_B"},
                                                {3, "schedule: ZERO_BUBBLE_H1"},
                                                {4, "schedule: ONE_F_ONE_B"},
                                                {2, "schedule: INTERLEAVED_1F1B virtual_stages: 2"},
                                                {2, "schedule: ZERO_BUBBLE_V"},
                                                {2, "schedule: DUALPIPE_V"}}) {
    const int parts = pipeline.find("schedule: ONE_F_ONE_B") == 0 ||
                              pipeline.find("ZERO_BUBBLE_H1") != std::string::npos
                          ? stages
                          : 2 * stages;
    const std::string full = absl::StrCat(pipeline, " ", Boundaries(parts));
    SCOPED_TRACE(absl::StrCat(full, " K=", stages));
    const PipelineRun run = RunSkips(stages, full, /*issue_order=*/true);
    ExpectSucceeded(run);
    EXPECT_EQ(run.weights, reference.weights);
  }
}

TEST(SkipConnectionsTest, EvaluationRunsTheSkipsForwardOnly) {
  const PipelineRun one = RunSkips(1, "schedule: ONE_F_ONE_B", false, /*eval_after=*/true);
  const PipelineRun four = RunSkips(4, absl::StrCat("schedule: ONE_F_ONE_B ", Boundaries(4)), false,
                                    /*eval_after=*/true);
  ExpectSucceeded(one);
  ExpectSucceeded(four);
  EXPECT_GT(one.eval_loss, 0.0);
  EXPECT_EQ(four.eval_loss, one.eval_loss);
}

// A program the verifier would refuse (add3's input never received): the join's stage fails
// naming the instruction and what is missing, and no stage hangs.
TEST(SkipConnectionsTest, AMissingSkipInputFailsNamingTheInstruction) {
  const PipelineRun run = RunPipeline(
      {.stages = 4,
       .overrides = {kModel, absl::StrCat("pipeline { schedule: GPIPE ", Boundaries(4), " }")},
       .wait_seconds = 3,
       .edit_program = [](schedule::Program& program) {
         auto& list = program.stage_programs[3].instructions;
         std::erase(list, schedule::Instruction(schedule::RecvSkip{0, 0, 9}));
       }});
  ASSERT_FALSE(run.statuses[3].ok());
  EXPECT_THAT(std::string(run.statuses[3].message()),
              ::testing::HasSubstr("instruction Forward(mb=0): layer 'add3' joins the output of "
                                   "'act1', which has not arrived"));
}

// The plan with kModel at `stages` stages and `pipeline`: its training program, its parts' bytes
// for micro-batches of 4 samples, the stage each part runs on, and the analyzed pipeline.
struct Measured {
  schedule::Program program;
  std::vector<PartBytes> parts;
  std::vector<int> part_stage;
  pb::Pipeline pipeline;
};
Measured MeasureSkips(int stages, const std::string& pipeline) {
  const LayerRegistry registry = LayerRegistry::WithBuiltins();
  auto loaded =
      ParsePlanText(testing::kPlan, "skip-memory.pbtxt", ".",
                    {kModel, absl::StrCat("pipeline { stages: ", stages, " ", pipeline, " }")});
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  if (!loaded.ok()) return {};
  auto analyzed = AnalyzePlan(*loaded, registry);
  EXPECT_TRUE(analyzed.ok()) << analyzed.status();
  if (!analyzed.ok()) return {};
  auto program = TrainingProgramOf(*analyzed);
  EXPECT_TRUE(program.ok()) << program.status();
  auto parts = MeasurePartBytes(*analyzed, registry, /*micro_batch_size=*/4);
  EXPECT_TRUE(parts.ok()) << parts.status();
  if (!program.ok() || !parts.ok()) return {};
  Measured measured{*std::move(program), *std::move(parts), {}, analyzed->plan.pipeline()};
  for (const auto& part : analyzed->stages) measured.part_stage.push_back(part.stage);
  return measured;
}

TEST(SkipConnectionsTest, MemoryMatchesThePrediction) {
  // One chunk per stage at K = 4, and ZERO_BUBBLE_V at K = 2 (add3's input a local hand-off).
  for (const char* schedule : {"GPIPE", "ONE_F_ONE_B", "ZERO_BUBBLE_H1", "ZERO_BUBBLE_V"}) {
    for (const char* remat : {"NEVER", "ALWAYS"}) {
      const int stages = std::string(schedule) == "ZERO_BUBBLE_V" ? 2 : 4;
      const std::string pipeline =
          absl::StrCat("schedule: ", schedule, " remat: ", remat, " ", Boundaries(4));
      SCOPED_TRACE(pipeline);
      const Measured m = MeasureSkips(stages, pipeline);
      ASSERT_EQ(m.program.skips.size(), 4u);  // add1, cat1, add2, add3
      // act1 ([8] f32 x 4 samples) leaves part 0 three times.
      EXPECT_EQ(m.parts.front().skips.size(), 3u);
      EXPECT_EQ(m.parts.front().skips.at(3), 8 * 4 * 4);
      const std::vector<StageActivationMemory> predicted =
          PredictActivationMemory(m.program, m.parts, m.pipeline.remat(), m.pipeline.offload(), 2);
      const PipelineRun run = RunSkips(stages, pipeline);
      ExpectSucceeded(run);
      for (size_t s = 0; s < predicted.size(); ++s) {
        SCOPED_TRACE(absl::StrCat("stage ", s));
        EXPECT_EQ(run.peak_boundary[s], predicted[s].boundary);
        // The gradients of the skip inputs are counted over the whole backward pass: an upper
        // bound by at most the stage's output gradients and one skip tensor per route.
        int64_t slack = 0;
        for (size_t part = 0; part < m.parts.size(); ++part) {
          if (m.part_stage[part] != static_cast<int>(s)) continue;
          slack += m.parts[part].output + m.parts[part].loss_grad;
          for (const auto& [layer, bytes] : m.parts[part].skips) slack += bytes;
        }
        EXPECT_LE(run.peak_boundary_grad[s], predicted[s].boundary_grad);
        EXPECT_GE(run.peak_boundary_grad[s], predicted[s].boundary_grad - slack);
        // Inside a layer the measured peak may add that layer's temporaries, and a join's
        // gradient sum a [4, 16] tensor.
        EXPECT_GE(run.peak_activation[s], predicted[s].activation);
        EXPECT_LE(run.peak_activation[s], predicted[s].activation + 4 * 4 * 16 * 4);
      }
    }
  }
}

// pipeline.offload STAGE_INPUTS: a re-materialized micro-batch's skip inputs (received from
// other chunks, joined again by its replay) go to host memory with its input. The bytes are
// what PredictActivationMemory says and training keeps the bits it has without offload.
TEST(SkipConnectionsTest, OffloadMovesTheSkipInputsWithTheStageInput) {
  for (const char* schedule : {"GPIPE", "ONE_F_ONE_B", "ZERO_BUBBLE_H1", "ZERO_BUBBLE_V"}) {
    const int stages = std::string(schedule) == "ZERO_BUBBLE_V" ? 2 : 4;
    const std::string pipeline =
        absl::StrCat("schedule: ", schedule, " remat: ALWAYS ", Boundaries(4));
    const std::string offloaded = pipeline + " offload: STAGE_INPUTS";
    SCOPED_TRACE(offloaded);
    const Measured m = MeasureSkips(stages, offloaded);
    ASSERT_EQ(m.program.skips.size(), 4u);
    const std::vector<StageActivationMemory> predicted =
        PredictActivationMemory(m.program, m.parts, m.pipeline.remat(), m.pipeline.offload(), 2);
    ASSERT_EQ(m.pipeline.offload(), pb::STAGE_INPUTS);
    const PipelineRun kept = RunSkips(stages, pipeline);
    const PipelineRun run = RunSkips(stages, offloaded);
    ExpectSucceeded(kept);
    ExpectSucceeded(run);
    EXPECT_EQ(run.weights, kept.weights) << "offload changed the arithmetic";
    ASSERT_EQ(run.last_reports.size(), predicted.size());
    for (const pb::StepReport& report : run.last_reports) {
      const int s = report.stage();
      SCOPED_TRACE(absl::StrCat("stage ", s));
      EXPECT_EQ(run.peak_boundary[s], predicted[s].boundary);
      EXPECT_EQ(report.peak_offload_bytes(), predicted[s].host);
      EXPECT_EQ(report.offloaded_bytes(), predicted[s].offloaded);
      EXPECT_LE(run.peak_boundary[s], kept.peak_boundary[s]);
      if (std::string(schedule) == "GPIPE" && s == 3) {
        // The last stage offloads micro-batches 0, 1 and 2 of 4, each its input (cat1's [16])
        // and the skips into add2 (fc3's [8]) and add3 (act1's [8]): 4 samples of f32.
        EXPECT_EQ(report.offloaded_bytes(), 3 * (16 + 8 + 8) * 4 * 4);
      }
    }
  }
}

}  // namespace
}  // namespace gpipe

#include "runtime/schedule/gpipe_builder.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/schedule/schedule_test_util.h"

namespace gpipe::schedule {
namespace {

using ::gpipe::schedule::testing::GpipeProgram;
using ::gpipe::schedule::testing::Strings;
using Lines = std::vector<std::string>;

TEST(GpipeBuilderTest, OneStageOneMicroBatchLoadsOnceThenForwardsAndBackwards) {
  const Program program = GpipeProgram(1, 1);
  EXPECT_EQ(program.kind, pb::GPIPE);
  EXPECT_EQ(program.stages, 1);
  EXPECT_EQ(program.micro_batches, 1);
  EXPECT_EQ(program.chunks, 1);
  ASSERT_EQ(program.stage_programs.size(), 1u);
  EXPECT_EQ(program.stage_programs[0].stage, 0);
  EXPECT_EQ(Strings(program.stage_programs[0]),
            (Lines{"LoadMicroBatch(mb=0)", "Forward(mb=0)", "Backward(mb=0)", "AllReduceGrads",
                   "OptimizerStep"}));
}

TEST(GpipeBuilderTest, TwoStagesTwoMicroBatchesExactLists) {
  const Program program = GpipeProgram(2, 2);
  ASSERT_EQ(program.stage_programs.size(), 2u);
  EXPECT_EQ(program.stage_programs[0].stage, 0);
  EXPECT_EQ(program.stage_programs[1].stage, 1);
  EXPECT_EQ(Strings(program.stage_programs[0]),
            (Lines{"LoadMicroBatch(mb=0)", "Forward(mb=0)", "SendActivation(mb=0)",
                   "LoadMicroBatch(mb=1)", "Forward(mb=1)", "SendActivation(mb=1)",
                   "RecvGrad(mb=1)", "Backward(mb=1)", "RecvGrad(mb=0)", "Backward(mb=0)",
                   "AllReduceGrads", "OptimizerStep"}));
  EXPECT_EQ(Strings(program.stage_programs[1]),
            (Lines{"RecvActivation(mb=0)", "LoadMicroBatch(mb=0)", "Forward(mb=0)",
                   "RecvActivation(mb=1)", "LoadMicroBatch(mb=1)", "Forward(mb=1)",
                   "Backward(mb=1)", "SendGrad(mb=1)", "Backward(mb=0)", "SendGrad(mb=0)",
                   "AllReduceGrads", "OptimizerStep"}));
}

TEST(GpipeBuilderTest, ThreeStagesFourMicroBatchesExactLists) {
  const Program program = GpipeProgram(3, 4);
  ASSERT_EQ(program.stage_programs.size(), 3u);
  EXPECT_EQ(Strings(program.stage_programs[0]),
            (Lines{"LoadMicroBatch(mb=0)", "Forward(mb=0)",  "SendActivation(mb=0)",
                   "LoadMicroBatch(mb=1)", "Forward(mb=1)",  "SendActivation(mb=1)",
                   "LoadMicroBatch(mb=2)", "Forward(mb=2)",  "SendActivation(mb=2)",
                   "LoadMicroBatch(mb=3)", "Forward(mb=3)",  "SendActivation(mb=3)",
                   "RecvGrad(mb=3)",       "Backward(mb=3)", "RecvGrad(mb=2)",
                   "Backward(mb=2)",       "RecvGrad(mb=1)", "Backward(mb=1)",
                   "RecvGrad(mb=0)",       "Backward(mb=0)", "AllReduceGrads",
                   "OptimizerStep"}));
  EXPECT_EQ(Strings(program.stage_programs[1]),
            (Lines{"RecvActivation(mb=0)", "Forward(mb=0)",  "SendActivation(mb=0)",
                   "RecvActivation(mb=1)", "Forward(mb=1)",  "SendActivation(mb=1)",
                   "RecvActivation(mb=2)", "Forward(mb=2)",  "SendActivation(mb=2)",
                   "RecvActivation(mb=3)", "Forward(mb=3)",  "SendActivation(mb=3)",
                   "RecvGrad(mb=3)",       "Backward(mb=3)", "SendGrad(mb=3)",
                   "RecvGrad(mb=2)",       "Backward(mb=2)", "SendGrad(mb=2)",
                   "RecvGrad(mb=1)",       "Backward(mb=1)", "SendGrad(mb=1)",
                   "RecvGrad(mb=0)",       "Backward(mb=0)", "SendGrad(mb=0)",
                   "AllReduceGrads",       "OptimizerStep"}));
  EXPECT_EQ(Strings(program.stage_programs[2]),
            (Lines{"RecvActivation(mb=0)", "LoadMicroBatch(mb=0)", "Forward(mb=0)",
                   "RecvActivation(mb=1)", "LoadMicroBatch(mb=1)", "Forward(mb=1)",
                   "RecvActivation(mb=2)", "LoadMicroBatch(mb=2)", "Forward(mb=2)",
                   "RecvActivation(mb=3)", "LoadMicroBatch(mb=3)", "Forward(mb=3)",
                   "Backward(mb=3)",       "SendGrad(mb=3)",       "Backward(mb=2)",
                   "SendGrad(mb=2)",       "Backward(mb=1)",       "SendGrad(mb=1)",
                   "Backward(mb=0)",       "SendGrad(mb=0)",       "AllReduceGrads",
                   "OptimizerStep"}));
}

TEST(GpipeBuilderTest, BuildProgramMatchesPerStageBuilder) {
  const Program program = GpipeProgram(5, 7);
  for (int s = 0; s < 5; ++s) {
    EXPECT_EQ(program.stage_programs[s].instructions, BuildGpipeStageProgram(s, 5, 7).instructions)
        << "stage " << s;
  }
}

// Forwards in ascending and backwards in descending micro-batch order on every stage, so the
// gradient accumulation order does not depend on K.
TEST(GpipeBuilderTest, ForwardsAscendAndBackwardsDescendOnEveryStage) {
  for (int k = 1; k <= 8; ++k) {
    for (int m = 1; m <= 9; ++m) {
      const Program program = GpipeProgram(k, m);
      for (const StageProgram& stage : program.stage_programs) {
        std::vector<int> forwards, backwards;
        for (const Instruction& instruction : stage.instructions) {
          if (const auto* f = std::get_if<Forward>(&instruction))
            forwards.push_back(f->micro_batch);
          if (const auto* b = std::get_if<Backward>(&instruction)) {
            backwards.push_back(b->micro_batch);
          }
        }
        std::vector<int> ascending(m), descending(m);
        for (int i = 0; i < m; ++i) {
          ascending[i] = i;
          descending[i] = m - 1 - i;
        }
        EXPECT_EQ(forwards, ascending) << "K=" << k << " M=" << m << " stage " << stage.stage;
        EXPECT_EQ(backwards, descending) << "K=" << k << " M=" << m << " stage " << stage.stage;
      }
    }
  }
}

TEST(GpipeBuilderTest, InstructionCountsFollowStagePosition) {
  const int m = 6;
  const Program program = GpipeProgram(4, m);
  // First: Load, Forward, Send, RecvGrad, Backward. Inner: +RecvActivation, +SendGrad, -Load.
  // Last: RecvActivation, Load, Forward, Backward, SendGrad. Plus the two step-level ones.
  EXPECT_EQ(program.stage_programs[0].instructions.size(), static_cast<size_t>(5 * m + 2));
  EXPECT_EQ(program.stage_programs[1].instructions.size(), static_cast<size_t>(6 * m + 2));
  EXPECT_EQ(program.stage_programs[2].instructions.size(), static_cast<size_t>(6 * m + 2));
  EXPECT_EQ(program.stage_programs[3].instructions.size(), static_cast<size_t>(5 * m + 2));
}

}  // namespace
}  // namespace gpipe::schedule

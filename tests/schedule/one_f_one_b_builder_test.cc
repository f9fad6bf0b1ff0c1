// ONE_F_ONE_B lists written out by hand from PipeDream-flush's order: stage s runs
// min(K-s-1, M) warm-up forwards, then forward/backward pairs, then the remaining backwards.
#include "runtime/schedule/one_f_one_b_builder.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/schedule/schedule_test_util.h"

namespace gpipe::schedule {
namespace {

using ::gpipe::schedule::testing::BuildOk;
using ::gpipe::schedule::testing::Strings;
using Lines = std::vector<std::string>;

TEST(OneFOneBBuilderTest, ThreeStagesFourMicroBatchesExactLists) {
  const Program program = BuildOk(pb::ONE_F_ONE_B, 3, 4);
  EXPECT_EQ(program.kind, pb::ONE_F_ONE_B);
  EXPECT_EQ(program.chunks, 1);
  ASSERT_EQ(program.stage_programs.size(), 3u);
  // Stage 0: warm-up F0 F1; pairs (F2, B0), (F3, B1); cool-down B2 B3.
  EXPECT_EQ(Strings(program.stage_programs[0]),
            (Lines{"LoadMicroBatch(mb=0)", "Forward(mb=0)",        "SendActivation(mb=0)",
                   "LoadMicroBatch(mb=1)", "Forward(mb=1)",        "SendActivation(mb=1)",
                   "LoadMicroBatch(mb=2)", "Forward(mb=2)",        "SendActivation(mb=2)",
                   "RecvGrad(mb=0)",       "Backward(mb=0)",       "LoadMicroBatch(mb=3)",
                   "Forward(mb=3)",        "SendActivation(mb=3)", "RecvGrad(mb=1)",
                   "Backward(mb=1)",       "RecvGrad(mb=2)",       "Backward(mb=2)",
                   "RecvGrad(mb=3)",       "Backward(mb=3)",       "AllReduceGrads",
                   "OptimizerStep"}));
  // Stage 1: warm-up F0; pairs (F1, B0), (F2, B1), (F3, B2); cool-down B3.
  EXPECT_EQ(Strings(program.stage_programs[1]),
            (Lines{"RecvActivation(mb=0)", "Forward(mb=0)",  "SendActivation(mb=0)",
                   "RecvActivation(mb=1)", "Forward(mb=1)",  "SendActivation(mb=1)",
                   "RecvGrad(mb=0)",       "Backward(mb=0)", "SendGrad(mb=0)",
                   "RecvActivation(mb=2)", "Forward(mb=2)",  "SendActivation(mb=2)",
                   "RecvGrad(mb=1)",       "Backward(mb=1)", "SendGrad(mb=1)",
                   "RecvActivation(mb=3)", "Forward(mb=3)",  "SendActivation(mb=3)",
                   "RecvGrad(mb=2)",       "Backward(mb=2)", "SendGrad(mb=2)",
                   "RecvGrad(mb=3)",       "Backward(mb=3)", "SendGrad(mb=3)",
                   "AllReduceGrads",       "OptimizerStep"}));
  // Stage 2 (last): no warm-up; it loads the targets after each input arrives.
  EXPECT_EQ(Strings(program.stage_programs[2]),
            (Lines{"RecvActivation(mb=0)", "LoadMicroBatch(mb=0)", "Forward(mb=0)",
                   "Backward(mb=0)",       "SendGrad(mb=0)",       "RecvActivation(mb=1)",
                   "LoadMicroBatch(mb=1)", "Forward(mb=1)",        "Backward(mb=1)",
                   "SendGrad(mb=1)",       "RecvActivation(mb=2)", "LoadMicroBatch(mb=2)",
                   "Forward(mb=2)",        "Backward(mb=2)",       "SendGrad(mb=2)",
                   "RecvActivation(mb=3)", "LoadMicroBatch(mb=3)", "Forward(mb=3)",
                   "Backward(mb=3)",       "SendGrad(mb=3)",       "AllReduceGrads",
                   "OptimizerStep"}));
}

TEST(OneFOneBBuilderTest, OneStageLoadsOncePerMicroBatchAndAlternates) {
  const Program program = BuildOk(pb::ONE_F_ONE_B, 1, 2);
  ASSERT_EQ(program.stage_programs.size(), 1u);
  EXPECT_EQ(
      Strings(program.stage_programs[0]),
      (Lines{"LoadMicroBatch(mb=0)", "Forward(mb=0)", "Backward(mb=0)", "LoadMicroBatch(mb=1)",
             "Forward(mb=1)", "Backward(mb=1)", "AllReduceGrads", "OptimizerStep"}));
}

// Fewer micro-batches than the warm-up wants: stage 0 of 4 forwards everything first.
TEST(OneFOneBBuilderTest, WarmUpIsCappedByTheMicroBatchCount) {
  const Program program = BuildOk(pb::ONE_F_ONE_B, 4, 2);
  EXPECT_EQ(Strings(program.stage_programs[0]),
            (Lines{"LoadMicroBatch(mb=0)", "Forward(mb=0)", "SendActivation(mb=0)",
                   "LoadMicroBatch(mb=1)", "Forward(mb=1)", "SendActivation(mb=1)",
                   "RecvGrad(mb=0)", "Backward(mb=0)", "RecvGrad(mb=1)", "Backward(mb=1)",
                   "AllReduceGrads", "OptimizerStep"}));
  // Stage 2 of 4: one warm-up forward, then pairs.
  EXPECT_EQ(Strings(program.stage_programs[2]),
            (Lines{"RecvActivation(mb=0)", "Forward(mb=0)", "SendActivation(mb=0)",
                   "RecvActivation(mb=1)", "Forward(mb=1)", "SendActivation(mb=1)",
                   "RecvGrad(mb=0)", "Backward(mb=0)", "SendGrad(mb=0)", "RecvGrad(mb=1)",
                   "Backward(mb=1)", "SendGrad(mb=1)", "AllReduceGrads", "OptimizerStep"}));
}

TEST(OneFOneBBuilderTest, BuildProgramMatchesPerStageBuilder) {
  const Program program = BuildOk(pb::ONE_F_ONE_B, 5, 7);
  for (int s = 0; s < 5; ++s) {
    EXPECT_EQ(program.stage_programs[s].instructions,
              BuildOneFOneBStageProgram(s, 5, 7).instructions)
        << "stage " << s;
  }
}

}  // namespace
}  // namespace gpipe::schedule

// EVAL lists written out by hand: GPipe's forward half, then ReportEval; no backward side.
#include "runtime/schedule/eval_builder.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/schedule/schedule_test_util.h"

namespace gpipe::schedule {
namespace {

using ::gpipe::schedule::testing::BuildOk;
using ::gpipe::schedule::testing::Strings;
using Lines = std::vector<std::string>;

TEST(EvalBuilderTest, TwoStagesTwoMicroBatchesExactLists) {
  const Program program = BuildOk(pb::EVAL, 2, 2);
  EXPECT_EQ(program.kind, pb::EVAL);
  EXPECT_TRUE(program.forward_only());
  ASSERT_EQ(program.stage_programs.size(), 2u);
  EXPECT_EQ(Strings(program.stage_programs[0]),
            (Lines{"LoadMicroBatch(mb=0)", "Forward(mb=0)", "SendActivation(mb=0)",
                   "LoadMicroBatch(mb=1)", "Forward(mb=1)", "SendActivation(mb=1)", "ReportEval"}));
  EXPECT_EQ(Strings(program.stage_programs[1]),
            (Lines{"RecvActivation(mb=0)", "LoadMicroBatch(mb=0)", "Forward(mb=0)",
                   "RecvActivation(mb=1)", "LoadMicroBatch(mb=1)", "Forward(mb=1)", "ReportEval"}));
}

TEST(EvalBuilderTest, OneStageLoadsOncePerMicroBatch) {
  const Program program = BuildOk(pb::EVAL, 1, 2);
  EXPECT_EQ(Strings(program.stage_programs[0]),
            (Lines{"LoadMicroBatch(mb=0)", "Forward(mb=0)", "LoadMicroBatch(mb=1)", "Forward(mb=1)",
                   "ReportEval"}));
}

TEST(EvalBuilderTest, InnerStageOnlyReceivesForwardsAndSends) {
  const Program program = BuildOk(pb::EVAL, 3, 1);
  EXPECT_EQ(Strings(program.stage_programs[1]),
            (Lines{"RecvActivation(mb=0)", "Forward(mb=0)", "SendActivation(mb=0)", "ReportEval"}));
}

TEST(EvalBuilderTest, BuildProgramMatchesPerStageBuilder) {
  const Program program = BuildOk(pb::EVAL, 4, 6);
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(program.stage_programs[s].instructions, BuildEvalStageProgram(s, 4, 6).instructions)
        << "stage " << s;
  }
}

}  // namespace
}  // namespace gpipe::schedule

// Training programs and forward-only (EVAL) programs hold different instructions: training
// ends every stage with AllReduceGrads, OptimizerStep and may not hold ReportEval; EVAL holds
// no backward side at all and ends every stage with ReportEval.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/schedule/verifier.h"
#include "tests/schedule/schedule_test_util.h"

namespace gpipe::schedule {
namespace {

using ::gpipe::schedule::testing::BuildOk;
using ::gpipe::schedule::testing::GpipeProgram;
using ::gpipe::schedule::testing::VerifyOrFail;
using ::testing::HasSubstr;

std::string VerifyError(const Program& program) {
  const absl::StatusOr<VerifyResult> result = VerifyProgram(program, OpCosts{});
  EXPECT_FALSE(result.ok()) << "the verifier accepted a broken program";
  if (result.ok()) return "";
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(result.status().message());
}

std::vector<Instruction>& List(Program& program, int stage) {
  return program.stage_programs[stage].instructions;
}

constexpr char kForwardOnly[] =
    "EVAL programs are forward-only: no RecvGrad, Backward, BackwardInput, BackwardWeight, "
    "SendGrad, AllReduceGrads or OptimizerStep; a stage forwards its micro-batches and ends "
    "with ReportEval";

TEST(VerifyProgramKindTest, EvalProgramsVerify) {
  const VerifyResult result = VerifyOrFail(BuildOk(pb::EVAL, 3, 4));
  EXPECT_DOUBLE_EQ(result.makespan, 6);
  EXPECT_EQ(result.peak_live_activations, (std::vector<int>{0, 0, 0}));
}

TEST(VerifyProgramKindTest, BackwardInAnEvalProgramIsRejected) {
  Program program = BuildOk(pb::EVAL, 2, 2);
  // Stage 1: RecvActivation(0) LoadMicroBatch(0) Forward(0) ... ReportEval (#6).
  List(program, 1).insert(List(program, 1).begin() + 3, Backward{0});
  EXPECT_EQ(VerifyError(program),
            absl::StrCat("stage 1, instruction #3 Backward(mb=0): ", kForwardOnly));
}

TEST(VerifyProgramKindTest, EveryBackwardSideKindIsRejectedInEval) {
  for (const Instruction& extra :
       std::vector<Instruction>{RecvGrad{0}, BackwardInput{0}, BackwardWeight{0}, SendGrad{0},
                                AllReduceGrads{}, OptimizerStep{}}) {
    Program program = BuildOk(pb::EVAL, 2, 1);
    List(program, 0).insert(List(program, 0).begin() + 3, extra);
    EXPECT_THAT(VerifyError(program), HasSubstr(absl::StrCat("stage 0, instruction #3 ",
                                                             ToString(extra), ": ", kForwardOnly)));
  }
}

TEST(VerifyProgramKindTest, EvalStageWithoutReportEvalIsRejected) {
  Program program = BuildOk(pb::EVAL, 2, 2);
  List(program, 1).pop_back();
  EXPECT_EQ(VerifyError(program),
            "stage 1: ReportEval is missing: every stage of a forward-only program ends with "
            "ReportEval (its last instruction is #5 Forward(mb=1))");
}

TEST(VerifyProgramKindTest, InstructionAfterReportEvalIsRejected) {
  Program program = BuildOk(pb::EVAL, 1, 1);  // LoadMicroBatch Forward ReportEval
  List(program, 0).push_back(Forward{0});
  EXPECT_THAT(VerifyError(program),
              HasSubstr("stage 0, instruction #3 Forward(mb=0): comes after ReportEval "
                        "(instruction #2), which must be the stage's last instruction"));
}

TEST(VerifyProgramKindTest, ReportEvalInATrainingProgramIsRejected) {
  Program program = GpipeProgram(2, 2);
  std::vector<Instruction>& list = List(program, 0);
  list.resize(list.size() - 2);  // drop AllReduceGrads, OptimizerStep
  list.push_back(ReportEval{});
  EXPECT_THAT(VerifyError(program),
              HasSubstr("stage 0, instruction #10 ReportEval: ReportEval ends forward-only (EVAL) "
                        "programs; a GPIPE training step ends with AllReduceGrads, "
                        "OptimizerStep"));
}

TEST(VerifyProgramKindTest, TrainingProgramWithoutBackwardIsRejected) {
  // The EVAL lists relabelled as training: every stage misses its backward side.
  Program program = BuildOk(pb::EVAL, 1, 1);
  program.kind = pb::ONE_F_ONE_B;
  List(program, 0).pop_back();
  EXPECT_THAT(VerifyError(program),
              HasSubstr("stage 0: Backward(mb=0) is missing: every micro-batch is backwarded once "
                        "on every stage"));
}

}  // namespace
}  // namespace gpipe::schedule

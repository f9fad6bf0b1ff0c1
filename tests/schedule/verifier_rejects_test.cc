// The verifier rejects programs broken in one place, with a message naming the stage, the
// instruction index and the instruction.
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/schedule/verifier.h"
#include "tests/schedule/schedule_test_util.h"

namespace gpipe::schedule {
namespace {

using ::gpipe::schedule::testing::GpipeProgram;
using ::gpipe::schedule::testing::IndexOf;
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

void Erase(Program& program, int stage, const Instruction& instruction) {
  std::vector<Instruction>& list = List(program, stage);
  list.erase(list.begin() + IndexOf(program, stage, instruction));
}

TEST(VerifyRejectsTest, MissingSendActivationNamesTheWaitingReceive) {
  Program program = GpipeProgram(3, 4);
  Erase(program, 0, SendActivation{1});
  EXPECT_THAT(VerifyError(program),
              HasSubstr("stage 1, instruction #3 RecvActivation(mb=1): no matching "
                        "SendActivation(mb=1) on stage 0"));
}

TEST(VerifyRejectsTest, MissingSendGradNamesTheWaitingReceive) {
  Program program = GpipeProgram(3, 4);
  Erase(program, 2, SendGrad{2});
  const int index = IndexOf(program, 1, RecvGrad{2});
  EXPECT_THAT(VerifyError(program),
              HasSubstr(absl::StrCat("stage 1, instruction #", index,
                                     " RecvGrad(mb=2): no matching SendGrad(mb=2) on stage 2")));
}

TEST(VerifyRejectsTest, UnreceivedSendNamesTheSend) {
  Program program = GpipeProgram(2, 2);
  // Drop stage 1's receive and its forward's need for it by also dropping the micro-batch's
  // whole forward/backward there: the send on stage 0 then has no receive.
  Erase(program, 1, RecvActivation{1});
  Erase(program, 1, LoadMicroBatch{1});
  Erase(program, 1, Forward{1});
  Erase(program, 1, Backward{1});
  Erase(program, 1, SendGrad{1});
  EXPECT_THAT(VerifyError(program),
              HasSubstr("stage 0, instruction #5 SendActivation(mb=1): stage 1 never receives it "
                        "(no matching RecvActivation(mb=1))"));
}

TEST(VerifyRejectsTest, SwappedActivationReceiveOrderIsRejected) {
  Program program = GpipeProgram(2, 2);
  // Stage 1 takes micro-batch 1's forward block before micro-batch 0's; stage 0 sends 0 first.
  std::vector<Instruction>& list = List(program, 1);
  std::rotate(list.begin(), list.begin() + 3, list.begin() + 6);
  ASSERT_EQ(ToString(list[0]), "RecvActivation(mb=1)");
  EXPECT_THAT(VerifyError(program),
              HasSubstr("stage 1, instruction #0 RecvActivation(mb=1): receives activations from "
                        "stage 0 in a different order than they are sent: the send it meets is "
                        "stage 0, instruction #2 SendActivation(mb=0)"));
}

TEST(VerifyRejectsTest, SwappedGradientReceiveOrderIsRejected) {
  Program program = GpipeProgram(2, 2);
  // Stage 0 backwards micro-batch 0 first; stage 1 sends micro-batch 1's gradient first.
  std::vector<Instruction>& list = List(program, 0);
  std::rotate(list.begin() + 6, list.begin() + 8, list.begin() + 10);
  ASSERT_EQ(ToString(list[6]), "RecvGrad(mb=0)");
  EXPECT_THAT(VerifyError(program),
              HasSubstr("stage 0, instruction #6 RecvGrad(mb=0): receives gradients from stage 1 "
                        "in a different order than they are sent: the send it meets is stage 1, "
                        "instruction #7 SendGrad(mb=1)"));
}

TEST(VerifyRejectsTest, DuplicatedBackwardIsRejected) {
  Program program = GpipeProgram(2, 2);
  std::vector<Instruction>& list = List(program, 1);
  const int all_reduce = IndexOf(program, 1, AllReduceGrads{});
  list.insert(list.begin() + all_reduce, Backward{0});
  EXPECT_THAT(VerifyError(program),
              HasSubstr("stage 1, instruction #10 Backward(mb=0): micro-batch 0 is backwarded "
                        "twice (first at instruction #8)"));
}

TEST(VerifyRejectsTest, BackwardBeforeItsForwardIsRejected) {
  Program program = GpipeProgram(2, 2);
  Erase(program, 1, Backward{1});
  List(program, 1).insert(List(program, 1).begin(), Backward{1});
  EXPECT_THAT(VerifyError(program),
              HasSubstr("stage 1, instruction #0 Backward(mb=1): Backward before Forward(mb=1): "
                        "micro-batch 1 has not been forwarded on this stage yet"));
}

TEST(VerifyRejectsTest, BackwardBeforeItsGradientArrivesIsRejected) {
  Program program = GpipeProgram(2, 2);
  Erase(program, 0, RecvGrad{1});
  List(program, 0)
      .insert(List(program, 0).begin() + IndexOf(program, 0, Backward{1}) + 1, RecvGrad{1});
  EXPECT_THAT(VerifyError(program),
              HasSubstr("stage 0, instruction #6 Backward(mb=1): Backward before its output "
                        "gradient: no RecvGrad(mb=1) earlier on this stage"));
}

TEST(VerifyRejectsTest, MissingOptimizerStepIsRejected) {
  Program program = GpipeProgram(3, 2);
  List(program, 2).pop_back();
  const int last = static_cast<int>(List(program, 2).size()) - 1;
  EXPECT_THAT(VerifyError(program),
              HasSubstr(absl::StrCat("stage 2: OptimizerStep is missing: every stage ends with "
                                     "AllReduceGrads, OptimizerStep (its last instruction is #",
                                     last, " AllReduceGrads)")));
}

TEST(VerifyRejectsTest, InstructionAfterOptimizerStepIsRejected) {
  Program program = GpipeProgram(1, 1);
  List(program, 0).push_back(Forward{0});
  EXPECT_THAT(VerifyError(program),
              HasSubstr("stage 0, instruction #5 Forward(mb=0): comes after OptimizerStep "
                        "(instruction #4), which must be the stage's last instruction"));
}

TEST(VerifyRejectsTest, WorkAfterAllReduceIsRejected) {
  Program program = GpipeProgram(1, 2);
  std::vector<Instruction>& list = List(program, 0);
  std::swap(list[list.size() - 3], list[list.size() - 2]);  // AllReduceGrads before Backward(0)
  EXPECT_THAT(VerifyError(program),
              HasSubstr("stage 0, instruction #6 Backward(mb=0): comes after AllReduceGrads "
                        "(instruction #5)"));
}

TEST(VerifyRejectsTest, MissingBackwardIsRejected) {
  Program program = GpipeProgram(1, 2);
  Erase(program, 0, Backward{0});
  EXPECT_THAT(VerifyError(program),
              HasSubstr("stage 0: Backward(mb=0) is missing: every micro-batch is backwarded once "
                        "on every stage"));
}

// Stage 0 waits for micro-batch 0's gradient before sending its activation; stage 1 waits for
// that activation: a cycle.
TEST(VerifyRejectsTest, CyclicWaitIsReportedAsDeadlockNamingEveryStuckStage) {
  Program program = GpipeProgram(2, 1);
  std::vector<Instruction>& list = List(program, 0);
  ASSERT_EQ(ToString(list[2]), "SendActivation(mb=0)");
  std::swap(list[2], list[3]);  // RecvGrad(0) now comes before SendActivation(0)
  EXPECT_THAT(VerifyError(program),
              HasSubstr("deadlock: no stage can progress; stage 0, instruction #2 RecvGrad(mb=0) "
                        "waits for stage 1, instruction #4 SendGrad(mb=0); stage 1, instruction "
                        "#0 RecvActivation(mb=0) waits for stage 0, instruction #3 "
                        "SendActivation(mb=0)."));
}

TEST(VerifyRejectsTest, ThreeStageDeadlockListsOnlyStuckStages) {
  Program program = GpipeProgram(3, 2);
  std::vector<Instruction>& list = List(program, 1);
  // Stage 1 waits for micro-batch 1's gradient before sending micro-batch 1 on.
  const int send = IndexOf(program, 1, SendActivation{1});
  const int recv = IndexOf(program, 1, RecvGrad{1});
  std::rotate(list.begin() + send, list.begin() + recv, list.begin() + recv + 1);
  const std::string error = VerifyError(program);
  EXPECT_THAT(error, HasSubstr("deadlock: no stage can progress;"));
  EXPECT_THAT(error, HasSubstr("stage 0, instruction #6 RecvGrad(mb=1) waits for stage 1"));
  EXPECT_THAT(error, HasSubstr("stage 1, instruction #5 RecvGrad(mb=1) waits for stage 2"));
  EXPECT_THAT(error, HasSubstr("stage 2, instruction #3 RecvActivation(mb=1) waits for stage 1, "
                               "instruction #6 SendActivation(mb=1)"));
}

TEST(VerifyRejectsTest, MicroBatchOutOfRangeIsRejected) {
  Program program = GpipeProgram(2, 2);
  List(program, 0)[1] = Forward{2};
  EXPECT_THAT(VerifyError(program),
              HasSubstr("stage 0, instruction #1 Forward(mb=2): micro-batch 2 is out of range: "
                        "the program has 2 micro-batches (0..1)"));
}

TEST(VerifyRejectsTest, LoadOnAnInnerStageIsRejected) {
  Program program = GpipeProgram(3, 1);
  List(program, 1).insert(List(program, 1).begin(), LoadMicroBatch{0});
  EXPECT_THAT(VerifyError(program),
              HasSubstr("stage 1, instruction #0 LoadMicroBatch(mb=0): only the first stage "
                        "(inputs) and the last stage (targets) load micro-batches"));
}

TEST(VerifyRejectsTest, LastStageForwardBeforeTargetsIsRejected) {
  Program program = GpipeProgram(2, 1);
  Erase(program, 1, LoadMicroBatch{0});
  EXPECT_THAT(VerifyError(program),
              HasSubstr("stage 1, instruction #1 Forward(mb=0): Forward before its targets: the "
                        "last stage must LoadMicroBatch(mb=0) before forwarding"));
}

TEST(VerifyRejectsTest, FirstStageReceivingActivationIsRejected) {
  Program program = GpipeProgram(2, 1);
  List(program, 0)[0] = RecvActivation{0};
  EXPECT_THAT(VerifyError(program),
              HasSubstr("stage 0, instruction #0 RecvActivation(mb=0): the first stage has no "
                        "previous stage to receive activations from"));
}

TEST(VerifyRejectsTest, WrongNumberOfStageProgramsIsRejected) {
  Program program = GpipeProgram(3, 2);
  program.stage_programs.pop_back();
  EXPECT_THAT(VerifyError(program),
              HasSubstr("program has 3 stages but 2 stage programs; give one per stage"));
}

TEST(VerifyRejectsTest, StageProgramsOutOfOrderAreRejected) {
  Program program = GpipeProgram(3, 2);
  std::swap(program.stage_programs[1], program.stage_programs[2]);
  EXPECT_THAT(VerifyError(program), HasSubstr("stage program #1 says it is stage 2"));
}

TEST(VerifyRejectsTest, EmptyProgramShapeIsRejected) {
  Program program;
  EXPECT_THAT(VerifyError(program), HasSubstr("program has 0 stages, 0 micro-batches"));
}

}  // namespace
}  // namespace gpipe::schedule

// The verifier's rules for the zero-bubble split: a micro-batch is backwarded by Backward, or
// by BackwardInput then BackwardWeight, never both and never W first; SendGrad needs the input
// gradient; activations stay live until the backward is complete. Broken programs are ZB-H1's
// K = 2, M = 3 lists (zero_bubble_builder_test.cc spells them out) edited in one place.
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
using ::gpipe::schedule::testing::IndexOf;
using ::gpipe::schedule::testing::VerifyOrFail;
using ::testing::HasSubstr;

std::string VerifyError(const Program& program) {
  const absl::StatusOr<VerifyResult> result = VerifyProgram(program, OpCosts{});
  EXPECT_FALSE(result.ok()) << "the verifier accepted a broken program";
  if (result.ok()) return "";
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(result.status().message());
}

// Stage 1: RecvActivation(0) LoadMicroBatch(0) Forward(0) BackwardInput(0) SendGrad(0)
// RecvActivation(1) LoadMicroBatch(1) Forward(1) BackwardInput(1) SendGrad(1)
// BackwardWeight(0) ... (#3 B(0), #4 SendGrad(0), #10 W(0): H1 delays W by one on stage 1).
Program SplitProgram() { return BuildOk(pb::ZERO_BUBBLE_H1, 2, 3); }

std::vector<Instruction>& List(Program& program, int stage) {
  return program.stage_programs[stage].instructions;
}

TEST(VerifySplitBackwardTest, WeightGradientBeforeInputGradientIsRejected) {
  Program program = SplitProgram();
  ASSERT_EQ(IndexOf(program, 1, BackwardWeight{0}), 10);
  std::swap(List(program, 1)[3], List(program, 1)[10]);
  EXPECT_THAT(VerifyError(program),
              HasSubstr("stage 1, instruction #3 BackwardWeight(mb=0): BackwardWeight before "
                        "BackwardInput(mb=0): the weight gradients are what the input-gradient "
                        "pass deferred; run it first"));
}

TEST(VerifySplitBackwardTest, BackwardAfterBackwardInputIsRejected) {
  Program program = SplitProgram();
  List(program, 1).insert(List(program, 1).begin() + 4, Backward{0});
  EXPECT_THAT(VerifyError(program),
              HasSubstr("stage 1, instruction #4 Backward(mb=0): micro-batch 0 already has "
                        "BackwardInput(mb=0) at instruction #3; a micro-batch is backwarded by "
                        "Backward, or by BackwardInput then BackwardWeight, not both"));
}

TEST(VerifySplitBackwardTest, BackwardWeightAfterWholeBackwardIsRejected) {
  Program program = GpipeProgram(1, 1);  // LoadMicroBatch Forward Backward AllReduce Optimizer
  List(program, 0).insert(List(program, 0).begin() + 3, BackwardWeight{0});
  EXPECT_THAT(VerifyError(program),
              HasSubstr("stage 0, instruction #3 BackwardWeight(mb=0): micro-batch 0 already has "
                        "Backward(mb=0) at instruction #2"));
}

TEST(VerifySplitBackwardTest, DuplicatedBackwardInputIsRejected) {
  Program program = SplitProgram();
  List(program, 1).insert(List(program, 1).begin() + 4, BackwardInput{0});
  EXPECT_THAT(VerifyError(program),
              HasSubstr("stage 1, instruction #4 BackwardInput(mb=0): micro-batch 0 has its input "
                        "gradient computed twice (first at instruction #3)"));
}

TEST(VerifySplitBackwardTest, SendGradBeforeBackwardInputIsRejected) {
  Program program = SplitProgram();
  std::swap(List(program, 1)[3], List(program, 1)[4]);
  EXPECT_THAT(VerifyError(program),
              HasSubstr("stage 1, instruction #3 SendGrad(mb=0): sends before Backward(mb=0) (or "
                        "BackwardInput(mb=0)) has produced the gradient"));
}

TEST(VerifySplitBackwardTest, BackwardInputBeforeItsGradientArrivesIsRejected) {
  Program program = SplitProgram();
  const int recv = IndexOf(program, 0, RecvGrad{0});
  std::swap(List(program, 0)[recv], List(program, 0)[recv + 1]);
  EXPECT_THAT(VerifyError(program),
              HasSubstr(absl::StrCat("stage 0, instruction #", recv,
                                     " BackwardInput(mb=0): BackwardInput before its output "
                                     "gradient: no RecvGrad(mb=0) earlier on this stage")));
}

TEST(VerifySplitBackwardTest, MissingBackwardWeightIsRejected) {
  Program program = SplitProgram();
  const int input = IndexOf(program, 0, BackwardInput{2});
  List(program, 0).erase(List(program, 0).begin() + IndexOf(program, 0, BackwardWeight{2}));
  EXPECT_THAT(VerifyError(program),
              HasSubstr(absl::StrCat("stage 0: BackwardWeight(mb=2) is missing: "
                                     "BackwardInput(mb=2) at instruction #",
                                     input,
                                     " deferred the weight gradients, which must be "
                                     "accumulated before AllReduceGrads")));
}

TEST(VerifySplitBackwardTest, BackwardWeightAfterAllReduceIsRejected) {
  Program program = SplitProgram();
  std::vector<Instruction>& list = List(program, 0);
  list.erase(list.begin() + IndexOf(program, 0, BackwardWeight{2}));
  list.insert(list.end() - 1, BackwardWeight{2});  // between AllReduceGrads and OptimizerStep
  EXPECT_THAT(VerifyError(program), HasSubstr("BackwardWeight(mb=2): comes after AllReduceGrads"));
}

// One stage, F = 1, B = 2, W = 0.5: W takes its own cost, Backward would take B + W, and a
// micro-batch's activations count as live until its W.
TEST(VerifySplitBackwardTest, SplitPassesTakeTheirOwnCostsAndHoldActivationsUntilW) {
  Program program;
  program.kind = pb::ZERO_BUBBLE_H2;
  program.stages = 1;
  program.micro_batches = 2;
  program.stage_programs = {{0,
                             {LoadMicroBatch{0}, Forward{0}, LoadMicroBatch{1}, Forward{1},
                              BackwardInput{0}, BackwardInput{1}, BackwardWeight{0},
                              BackwardWeight{1}, AllReduceGrads{}, OptimizerStep{}}}};
  OpCosts costs;
  costs.backward_input = 2;
  costs.backward_weight = 0.5;
  const VerifyResult result = VerifyOrFail(program, costs);
  EXPECT_DOUBLE_EQ(result.makespan, 2 * 1 + 2 * 2 + 2 * 0.5);
  EXPECT_DOUBLE_EQ(result.bubble_fraction, 0);
  EXPECT_EQ(result.peak_live_activations, std::vector<int>{2});
  ASSERT_EQ(result.timeline.size(), 10u);
  EXPECT_DOUBLE_EQ(result.timeline[4].end - result.timeline[4].start, 2);    // BackwardInput
  EXPECT_DOUBLE_EQ(result.timeline[6].end - result.timeline[6].start, 0.5);  // BackwardWeight

  // Running W(0) before F(1) frees micro-batch 0 first: one live at a time.
  program.stage_programs[0].instructions = {
      LoadMicroBatch{0}, Forward{0},       BackwardInput{0},  BackwardWeight{0}, LoadMicroBatch{1},
      Forward{1},        BackwardInput{1}, BackwardWeight{1}, AllReduceGrads{},  OptimizerStep{}};
  EXPECT_EQ(VerifyOrFail(program, costs).peak_live_activations, std::vector<int>{1});
}

}  // namespace
}  // namespace gpipe::schedule

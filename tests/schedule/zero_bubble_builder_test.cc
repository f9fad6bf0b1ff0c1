// ZERO_BUBBLE_H1/H2 lists for K = 2, M = 3, worked out by hand from the rules in
// zero_bubble_builder.h. H1: 1F1B's order of F and B with W(j - s) right after B(j) and the
// last s W's at the end. H2: the unit-cost list scheduler (a free stage starts B if its
// gradient is there, else F if its input is there and it holds fewer than 2K - 1 - s
// micro-batches, else the oldest pending W).
#include "runtime/schedule/zero_bubble_builder.h"

#include <string>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/schedule/schedule_test_util.h"

namespace gpipe::schedule {
namespace {

using ::gpipe::schedule::testing::BuildOk;
using ::gpipe::schedule::testing::Strings;
using ::gpipe::schedule::testing::VerifyOrFail;
using Lines = std::vector<std::string>;

// Stage `stage`'s compute passes with their simulated times, "F0[0,1]", in program order.
Lines ComputeTimeline(const Program& program, const VerifyResult& result, int stage) {
  Lines cells;
  for (const TimelineEntry& entry : result.timeline) {
    if (entry.stage != stage) continue;
    const Instruction& instruction = program.stage_programs[stage].instructions[entry.index];
    const char* pass = std::holds_alternative<Forward>(instruction)          ? "F"
                       : std::holds_alternative<BackwardInput>(instruction)  ? "B"
                       : std::holds_alternative<BackwardWeight>(instruction) ? "W"
                                                                             : nullptr;
    if (pass == nullptr) continue;
    cells.push_back(
        absl::StrCat(pass, *MicroBatchOf(instruction), "[", entry.start, ",", entry.end, "]"));
  }
  return cells;
}

TEST(ZeroBubbleBuilderTest, CapsAreOneFOneBFirstStageMemoryForH1AndAboutTwiceForH2) {
  EXPECT_EQ(ZeroBubbleLiveCap(ZeroBubbleVariant::kH1, 0, 4), 4);
  EXPECT_EQ(ZeroBubbleLiveCap(ZeroBubbleVariant::kH1, 3, 4), 4);
  EXPECT_EQ(ZeroBubbleLiveCap(ZeroBubbleVariant::kH2, 0, 4), 7);
  EXPECT_EQ(ZeroBubbleLiveCap(ZeroBubbleVariant::kH2, 3, 4), 4);
}

// Stage 0 (W delay 0): F0 F1 B0 W0 F2 B1 W1 B2 W2; stage 1 (W delay 1): F0 B0 F1 B1 W0 F2 B2 W1
// W2. Stage 1's W0 fills the slot where 1F1B's stage 1 would wait for F2's input, and its last
// W's run while stage 0 finishes B2 W2: makespan 10 = 3M + K - 1.
TEST(ZeroBubbleBuilderTest, H1TwoStagesThreeMicroBatchesExactLists) {
  const Program program = BuildOk(pb::ZERO_BUBBLE_H1, 2, 3);
  EXPECT_EQ(program.kind, pb::ZERO_BUBBLE_H1);
  EXPECT_EQ(program.chunks, 1);
  ASSERT_EQ(program.stage_programs.size(), 2u);
  EXPECT_EQ(Strings(program.stage_programs[0]),
            (Lines{"LoadMicroBatch(mb=0)", "Forward(mb=0)",       "SendActivation(mb=0)",
                   "LoadMicroBatch(mb=1)", "Forward(mb=1)",       "SendActivation(mb=1)",
                   "RecvGrad(mb=0)",       "BackwardInput(mb=0)", "BackwardWeight(mb=0)",
                   "LoadMicroBatch(mb=2)", "Forward(mb=2)",       "SendActivation(mb=2)",
                   "RecvGrad(mb=1)",       "BackwardInput(mb=1)", "BackwardWeight(mb=1)",
                   "RecvGrad(mb=2)",       "BackwardInput(mb=2)", "BackwardWeight(mb=2)",
                   "AllReduceGrads",       "OptimizerStep"}));
  EXPECT_EQ(Strings(program.stage_programs[1]),
            (Lines{"RecvActivation(mb=0)", "LoadMicroBatch(mb=0)", "Forward(mb=0)",
                   "BackwardInput(mb=0)",  "SendGrad(mb=0)",       "RecvActivation(mb=1)",
                   "LoadMicroBatch(mb=1)", "Forward(mb=1)",        "BackwardInput(mb=1)",
                   "SendGrad(mb=1)",       "BackwardWeight(mb=0)", "RecvActivation(mb=2)",
                   "LoadMicroBatch(mb=2)", "Forward(mb=2)",        "BackwardInput(mb=2)",
                   "SendGrad(mb=2)",       "BackwardWeight(mb=1)", "BackwardWeight(mb=2)",
                   "AllReduceGrads",       "OptimizerStep"}));
  const VerifyResult result = VerifyOrFail(program);
  EXPECT_EQ(ComputeTimeline(program, result, 0),
            (Lines{"F0[0,1]", "F1[1,2]", "B0[3,4]", "W0[4,5]", "F2[5,6]", "B1[6,7]", "W1[7,8]",
                   "B2[8,9]", "W2[9,10]"}));
  EXPECT_EQ(ComputeTimeline(program, result, 1),
            (Lines{"F0[1,2]", "B0[2,3]", "F1[3,4]", "B1[4,5]", "W0[5,6]", "F2[6,7]", "B2[7,8]",
                   "W1[8,9]", "W2[9,10]"}));
  EXPECT_DOUBLE_EQ(result.makespan, 10);
  EXPECT_EQ(result.peak_live_activations, (std::vector<int>{2, 2}));
}

// The rule for any shape: dropping the W's leaves 1F1B's list with Backward split into
// BackwardInput; on stage s, W(j - s) comes right after B(j) (only its SendGrad between them),
// and the last s W's close the list after B(M-1).
TEST(ZeroBubbleBuilderTest, H1IsOneFOneBWithWeightGradientsDelayedByTheStageIndex) {
  for (int k = 1; k <= 6; ++k) {
    for (int m = 1; m <= 12; ++m) {
      const Program h1 = BuildOk(pb::ZERO_BUBBLE_H1, k, m);
      const Program one_f_one_b = BuildOk(pb::ONE_F_ONE_B, k, m);
      for (int s = 0; s < k; ++s) {
        const std::string where = absl::StrCat("K=", k, " M=", m, " stage ", s);
        std::vector<Instruction> without_w;
        Instruction previous_compute = OptimizerStep{};  // none yet
        for (const Instruction& instruction : h1.stage_programs[s].instructions) {
          if (const auto* w = std::get_if<BackwardWeight>(&instruction)) {
            const int j = w->micro_batch + s;
            if (j < m) {
              EXPECT_EQ(previous_compute, Instruction(BackwardInput{j})) << where << " " << j;
            } else {
              EXPECT_TRUE(previous_compute == Instruction(BackwardInput{m - 1}) ||
                          std::holds_alternative<BackwardWeight>(previous_compute))
                  << where << ": W(" << w->micro_batch << ") after " << ToString(previous_compute);
            }
            previous_compute = instruction;
            continue;
          }
          if (const auto* b = std::get_if<BackwardInput>(&instruction)) {
            without_w.push_back(Backward{b->micro_batch, b->chunk});
            previous_compute = instruction;
            continue;
          }
          if (std::holds_alternative<Forward>(instruction)) previous_compute = instruction;
          without_w.push_back(instruction);
        }
        EXPECT_EQ(without_w, one_f_one_b.stage_programs[s].instructions) << where;
      }
    }
  }
}

// Caps 3 (stage 0) and 2 (stage 1).
//   0: F0 / -      1: F1 / F0     2: F2 / b0     3: b0 / F1     4: W0 / b1
//   5: b1 / W0 (F2 would exceed cap 2)   6: W1 / F2   7: - / b2   8: b2 / W1   9: W2 / W2
//   makespan 10 = 3M + K - 1
TEST(ZeroBubbleBuilderTest, H2TwoStagesThreeMicroBatchesExactLists) {
  const Program program = BuildOk(pb::ZERO_BUBBLE_H2, 2, 3);
  EXPECT_EQ(program.kind, pb::ZERO_BUBBLE_H2);
  ASSERT_EQ(program.stage_programs.size(), 2u);
  EXPECT_EQ(Strings(program.stage_programs[0]),
            (Lines{"LoadMicroBatch(mb=0)", "Forward(mb=0)",       "SendActivation(mb=0)",
                   "LoadMicroBatch(mb=1)", "Forward(mb=1)",       "SendActivation(mb=1)",
                   "LoadMicroBatch(mb=2)", "Forward(mb=2)",       "SendActivation(mb=2)",
                   "RecvGrad(mb=0)",       "BackwardInput(mb=0)", "BackwardWeight(mb=0)",
                   "RecvGrad(mb=1)",       "BackwardInput(mb=1)", "BackwardWeight(mb=1)",
                   "RecvGrad(mb=2)",       "BackwardInput(mb=2)", "BackwardWeight(mb=2)",
                   "AllReduceGrads",       "OptimizerStep"}));
  EXPECT_EQ(Strings(program.stage_programs[1]),
            (Lines{"RecvActivation(mb=0)", "LoadMicroBatch(mb=0)", "Forward(mb=0)",
                   "BackwardInput(mb=0)",  "SendGrad(mb=0)",       "RecvActivation(mb=1)",
                   "LoadMicroBatch(mb=1)", "Forward(mb=1)",        "BackwardInput(mb=1)",
                   "SendGrad(mb=1)",       "BackwardWeight(mb=0)", "RecvActivation(mb=2)",
                   "LoadMicroBatch(mb=2)", "Forward(mb=2)",        "BackwardInput(mb=2)",
                   "SendGrad(mb=2)",       "BackwardWeight(mb=1)", "BackwardWeight(mb=2)",
                   "AllReduceGrads",       "OptimizerStep"}));
  EXPECT_DOUBLE_EQ(VerifyOrFail(program).makespan, 10);
}

TEST(ZeroBubbleBuilderTest, OneStageRunsForwardInputGradientWeightGradientPerMicroBatch) {
  const Program program = BuildOk(pb::ZERO_BUBBLE_H1, 1, 2);
  EXPECT_EQ(
      Strings(program.stage_programs[0]),
      (Lines{"LoadMicroBatch(mb=0)", "Forward(mb=0)", "BackwardInput(mb=0)", "BackwardWeight(mb=0)",
             "LoadMicroBatch(mb=1)", "Forward(mb=1)", "BackwardInput(mb=1)", "BackwardWeight(mb=1)",
             "AllReduceGrads", "OptimizerStep"}));
}

TEST(ZeroBubbleBuilderTest, SameShapeGivesTheSameProgram) {
  const Program a = BuildOk(pb::ZERO_BUBBLE_H2, 7, 19);
  const Program b = BuildOk(pb::ZERO_BUBBLE_H2, 7, 19);
  for (int s = 0; s < 7; ++s) {
    EXPECT_EQ(a.stage_programs[s].instructions, b.stage_programs[s].instructions) << "stage " << s;
  }
}

}  // namespace
}  // namespace gpipe::schedule

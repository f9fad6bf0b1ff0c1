#include "runtime/schedule/grid.h"

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/schedule/schedule_test_util.h"

namespace gpipe::schedule {
namespace {

using ::gpipe::schedule::testing::GpipeProgram;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Draw(const Program& program, const OpCosts& costs = {}, int max_columns = 120) {
  const absl::StatusOr<VerifyResult> result = VerifyProgram(program, costs);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? DrawGrid(program, *result, max_columns) : "";
}

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

TEST(GridTest, TwoStagesTwoMicroBatchesGolden) {
  EXPECT_EQ(Draw(GpipeProgram(2, 2)),
            R"(GPIPE schedule: 2 stages, 2 micro-batches, makespan 9, one column = 1 time unit
time    | 0              5
stage 0 | F0 F1 .  .  .  B1 B1 B0 B0 |  33.3%
stage 1 | .  F0 F1 B1 B1 B0 B0 .  .  |  33.3%
legend: Fm/Bm = forward/backward of micro-batch m, . = idle; right: bubble per stage
bubble: 33.3% overall (mean over stages of idle time / makespan); equal stages: (K-1)/(M+K-1) = 33.3%
)");
}

TEST(GridTest, FourStagesEightMicroBatchesGoldenFitsIn120Columns) {
  const std::string grid = Draw(GpipeProgram(4, 8));
  EXPECT_EQ(grid,
            R"(GPIPE schedule: 4 stages, 8 micro-batches, makespan 33, one column = 1 time unit
time    | 0              5              10             15             20             25             30
stage 0 | F0 F1 F2 F3 F4 F5 F6 F7 .  .  .  .  .  .  .  .  .  B7 B7 B6 B6 B5 B5 B4 B4 B3 B3 B2 B2 B1 B1 B0 B0 |  27.3%
stage 1 | .  F0 F1 F2 F3 F4 F5 F6 F7 .  .  .  .  .  .  B7 B7 B6 B6 B5 B5 B4 B4 B3 B3 B2 B2 B1 B1 B0 B0 .  .  |  27.3%
stage 2 | .  .  F0 F1 F2 F3 F4 F5 F6 F7 .  .  .  B7 B7 B6 B6 B5 B5 B4 B4 B3 B3 B2 B2 B1 B1 B0 B0 .  .  .  .  |  27.3%
stage 3 | .  .  .  F0 F1 F2 F3 F4 F5 F6 F7 B7 B7 B6 B6 B5 B5 B4 B4 B3 B3 B2 B2 B1 B1 B0 B0 .  .  .  .  .  .  |  27.3%
legend: Fm/Bm = forward/backward of micro-batch m, . = idle; right: bubble per stage
bubble: 27.3% overall (mean over stages of idle time / makespan); equal stages: (K-1)/(M+K-1) = 27.3%
)");
  for (const std::string& line : Lines(grid)) EXPECT_LE(line.size(), 120u) << line;
}

TEST(GridTest, NarrowWidthDropsMicroBatchNumbersButKeepsTimeResolution) {
  const std::vector<std::string> lines = Lines(Draw(GpipeProgram(2, 2), OpCosts{}, 30));
  ASSERT_GE(lines.size(), 4u);
  EXPECT_EQ(lines[0],
            "GPIPE schedule: 2 stages, 2 micro-batches, makespan 9, one column = 1 time unit");
  EXPECT_EQ(lines[1], "time    |0    5");
  EXPECT_EQ(lines[2], "stage 0 |FF...BBBB|  33.3%");
  EXPECT_EQ(lines[3], "stage 1 |.FFBBBB..|  33.3%");
  EXPECT_THAT(lines[4], HasSubstr("micro-batch numbers do not fit in 30 columns"));
}

TEST(GridTest, LargeMicroBatchCountScalesTimeToFit) {
  const std::string grid = Draw(GpipeProgram(4, 64));
  const std::vector<std::string> lines = Lines(grid);
  EXPECT_THAT(lines[0], HasSubstr("makespan 201, one column = 2 time units"));
  EXPECT_EQ(lines[2],
            "stage 0 |FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF....BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"
            "BBBBBBBBBBBBBBBBBBBBBBBBB|   4.5%");
  EXPECT_EQ(lines[5],
            "stage 3 |.FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"
            "BBBBBBBBBBBBBBBBBBBBBBB...|   4.5%");
  for (const std::string& line : lines) EXPECT_LE(line.size(), 120u) << line;
}

TEST(GridTest, EveryGpipeGridFitsIn120Columns) {
  for (int k : {1, 2, 5, 8, 16}) {
    for (int m : {1, 4, 13, 32, 64}) {
      const std::vector<std::string> lines = Lines(Draw(GpipeProgram(k, m)));
      ASSERT_EQ(lines.size(), static_cast<size_t>(k) + 4) << "K=" << k << " M=" << m;
      for (const std::string& line : lines) {
        EXPECT_LE(line.size(), 120u) << "K=" << k << " M=" << m << ": " << line;
      }
    }
  }
}

TEST(GridTest, VeryShortOpsNextToLongOnesStillFit) {
  OpCosts costs;
  costs.forward = 1e-9;  // a column per forward would need billions of columns
  costs.backward_input = 0.5;
  costs.backward_weight = 0.5;
  const std::vector<std::string> lines = Lines(Draw(GpipeProgram(2, 2), costs));
  ASSERT_EQ(lines.size(), 6u);
  for (const std::string& line : lines) EXPECT_LE(line.size(), 120u) << line;
  EXPECT_THAT(lines[2], HasSubstr("BB"));
}

TEST(GridTest, TransferLatencyRefinesTheColumnToHalfUnits) {
  OpCosts costs;
  costs.send = 0.5;
  const std::vector<std::string> lines = Lines(Draw(GpipeProgram(2, 1), costs));
  EXPECT_EQ(lines[0],
            "GPIPE schedule: 2 stages, 1 micro-batch, makespan 7, one column = 0.5 time units");
  EXPECT_EQ(lines[1], "time    | 0              2.5            5");
  EXPECT_EQ(lines[2], "stage 0 | F0 F0 .  .  .  .  .  .  .  .  B0 B0 B0 B0 |  57.1%");
  EXPECT_EQ(lines[3], "stage 1 | .  .  .  F0 F0 B0 B0 B0 B0 .  .  .  .  .  |  57.1%");
}

TEST(GridTest, ChunksAreLetteredInCells) {
  Program program;
  program.stages = 2;
  program.micro_batches = 1;
  program.chunks = 2;
  program.stage_programs = {
      {0,
       {LoadMicroBatch{0, 0}, Forward{0, 0}, SendActivation{0, 0}, RecvActivation{0, 1},
        Forward{0, 1}, SendActivation{0, 1}, RecvGrad{0, 1}, Backward{0, 1}, SendGrad{0, 1},
        RecvGrad{0, 0}, Backward{0, 0}, AllReduceGrads{}, OptimizerStep{}}},
      {1,
       {RecvActivation{0, 0}, Forward{0, 0}, SendActivation{0, 0}, RecvActivation{0, 1},
        LoadMicroBatch{0, 1}, Forward{0, 1}, Backward{0, 1}, SendGrad{0, 1}, RecvGrad{0, 0},
        Backward{0, 0}, SendGrad{0, 0}, AllReduceGrads{}, OptimizerStep{}}}};
  const std::vector<std::string> lines = Lines(Draw(program));
  EXPECT_EQ(
      lines[0],
      "GPIPE schedule: 2 stages, 1 micro-batch, 2 chunks per stage placed LOOPED, makespan 12, "
      "one column = 1 time unit");
  EXPECT_EQ(lines[2], "stage 0 | F0a .   F0b .   .   .   B0b B0b .   .   B0a B0a |  50.0%");
  EXPECT_EQ(lines[3], "stage 1 | .   F0a .   F0b B0b B0b .   .   B0a B0a .   .   |  50.0%");
  EXPECT_THAT(lines[4], HasSubstr("(letter = chunk)"));
}

// The ZB-H1 run zero_bubble_builder_test.cc works out by hand: b = input-gradient pass, W =
// weight-gradient pass.
TEST(GridTest, ZeroBubbleGoldenDrawsInputAndWeightGradientsApart) {
  EXPECT_EQ(
      Draw(testing::BuildOk(pb::ZERO_BUBBLE_H1, 2, 3)),
      R"(ZERO_BUBBLE_H1 schedule: 2 stages, 3 micro-batches, makespan 10, one column = 1 time unit
time    | 0              5
stage 0 | F0 F1 .  b0 W0 F2 b1 W1 b2 W2 |  10.0%
stage 1 | .  F0 b0 F1 b1 W0 F2 b2 W1 W2 |  10.0%
legend: Fm/bm/Wm = forward/input-gradient/weight-gradient of micro-batch m, . = idle; right: bubble per stage
bubble: 10.0% overall (mean over stages of idle time / makespan)
)");
}

TEST(GridTest, LegendNamesEveryPassDrawnInOrder) {
  Program program;
  program.kind = pb::ZERO_BUBBLE_H1;
  program.stages = 1;
  program.micro_batches = 2;
  program.stage_programs = {
      {0,
       {LoadMicroBatch{0}, Forward{0}, Backward{0}, LoadMicroBatch{1}, Forward{1}, BackwardInput{1},
        BackwardWeight{1}, AllReduceGrads{}, OptimizerStep{}}}};
  const std::vector<std::string> lines = Lines(Draw(program));
  EXPECT_EQ(lines[2], "stage 0 | F0 B0 B0 F1 b1 W1 |   0.0%");
  EXPECT_EQ(lines[3],
            "legend: Fm/Bm/bm/Wm = forward/backward/input-gradient/weight-gradient of "
            "micro-batch m, . = idle; right: bubble per stage");
  const std::vector<std::string> narrow = Lines(Draw(program, OpCosts{}, 24));
  EXPECT_EQ(narrow[2], "stage 0 |FBBFbW|   0.0%");
  EXPECT_THAT(narrow[3], HasSubstr("legend: F/B/b/W = forward/backward/input-gradient/"
                                   "weight-gradient (micro-batch numbers do not fit"));
}

TEST(GridTest, EvalShowsOnlyForwardsAndTheFillDrainFormula) {
  const std::vector<std::string> lines = Lines(Draw(testing::BuildOk(pb::EVAL, 3, 4)));
  ASSERT_EQ(lines.size(), 7u);
  EXPECT_EQ(lines[2], "stage 0 | F0 F1 F2 F3 .  .  |  33.3%");
  EXPECT_EQ(lines[4], "stage 2 | .  .  F0 F1 F2 F3 |  33.3%");
  EXPECT_EQ(lines[5], "legend: Fm = forward of micro-batch m, . = idle; right: bubble per stage");
  EXPECT_THAT(lines[6], HasSubstr("; equal stages: (K-1)/(M+K-1) = 33.3%"));
}

TEST(GridTest, PublishedBubbleIsQuotedWhereItHasAClosedForm) {
  EXPECT_THAT(Draw(testing::BuildOk(pb::ONE_F_ONE_B, 4, 8)),
              HasSubstr("bubble: 27.3% overall (mean over stages of idle time / makespan); equal "
                        "stages: (K-1)/(M+K-1) = 27.3%"));
  EXPECT_THAT(Draw(testing::BuildOk(pb::INTERLEAVED_1F1B, 4, 8, 2)),
              HasSubstr("bubble: 15.8% overall (mean over stages of idle time / makespan); equal "
                        "stages: (K-1)/(v*M+K-1) = 15.8%"));
  EXPECT_THAT(Draw(testing::BuildOk(pb::ZERO_BUBBLE_H2, 4, 8)), Not(HasSubstr("equal stages")));
}

TEST(GridTest, ZeroTimeScheduleSaysThereIsNothingToDraw) {
  OpCosts costs;
  costs.forward = 0;
  costs.backward_input = 0;
  costs.backward_weight = 0;
  EXPECT_EQ(Draw(GpipeProgram(2, 1), costs),
            "GPIPE schedule: 2 stages, 1 micro-batch, makespan 0\n"
            "(no forward or backward takes time: nothing to draw)\n");
}

}  // namespace
TEST(GridTest, VShapeHeaderNamesThePlacementAndADegenerateDualPipeVSaysWhatItRuns) {
  const std::vector<std::string> small = Lines(Draw(testing::BuildOk(pb::DUALPIPE_V, 4, 4, 2)));
  EXPECT_THAT(small[0], HasSubstr("2 chunks per stage placed V_SHAPE"));
  EXPECT_EQ(small[1],
            "note: DUALPIPE_V's phases need pipeline.micro_batches >= 2 * stages = 8; with 4 it "
            "runs ZERO_BUBBLE_V's order (use 8 or more micro-batches for DualPipeV's own)");
  const std::vector<std::string> full = Lines(Draw(testing::BuildOk(pb::DUALPIPE_V, 4, 8, 2)));
  EXPECT_THAT(full[1], Not(HasSubstr("note:")));
}

}  // namespace gpipe::schedule

#include "runtime/schedule/verifier.h"

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/schedule/schedule_test_util.h"

namespace gpipe::schedule {
namespace {

using ::gpipe::schedule::testing::GpipeProgram;
using ::testing::HasSubstr;

constexpr int kMaxStages = 16;
constexpr int kMaxMicroBatches = 64;

VerifyResult VerifyOk(const Program& program, const OpCosts& costs = {}) {
  absl::StatusOr<VerifyResult> result = VerifyProgram(program, costs);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *std::move(result) : VerifyResult{};
}

TEST(GpipeVerifyTest, AcceptsEveryGpipeProgramUpTo16StagesAnd64MicroBatches) {
  for (int k = 1; k <= kMaxStages; ++k) {
    for (int m = 1; m <= kMaxMicroBatches; ++m) {
      const absl::StatusOr<VerifyResult> result = VerifyProgram(GpipeProgram(k, m), OpCosts{});
      ASSERT_TRUE(result.ok()) << "K=" << k << " M=" << m << ": " << result.status();
    }
  }
}

// Uniform costs, no transfer latency: makespan (M+K-1)(F+B), bubble (K-1)/(M+K-1) on every
// stage (the GPipe paper's formula).
TEST(GpipeVerifyTest, MakespanAndBubbleMatchFillDrainFormula) {
  const OpCosts costs;  // F = 1, Backward = 1 + 1, send = 0, load = 0
  for (int k = 1; k <= kMaxStages; ++k) {
    for (int m = 1; m <= kMaxMicroBatches; ++m) {
      const VerifyResult result = VerifyOk(GpipeProgram(k, m), costs);
      const double expected_bubble = static_cast<double>(k - 1) / (m + k - 1);
      EXPECT_NEAR(result.makespan,
                  (m + k - 1) * (costs.forward + costs.backward_input + costs.backward_weight),
                  1e-12)
          << "K=" << k << " M=" << m;
      EXPECT_NEAR(result.bubble_fraction, expected_bubble, 1e-12) << "K=" << k << " M=" << m;
      ASSERT_EQ(result.stage_bubble.size(), static_cast<size_t>(k));
      for (int s = 0; s < k; ++s) {
        EXPECT_NEAR(result.stage_bubble[s], expected_bubble, 1e-12)
            << "K=" << k << " M=" << m << " stage " << s;
      }
    }
  }
}

TEST(GpipeVerifyTest, PeakLiveActivationsIsMicroBatchesOnEveryStage) {
  for (int k = 1; k <= kMaxStages; ++k) {
    for (int m = 1; m <= kMaxMicroBatches; ++m) {
      const VerifyResult result = VerifyOk(GpipeProgram(k, m));
      EXPECT_EQ(result.peak_live_activations, std::vector<int>(k, m)) << "K=" << k << " M=" << m;
    }
  }
}

TEST(GpipeVerifyTest, FormulaHoldsForOtherUniformCosts) {
  OpCosts costs;
  costs.forward = 0.75;
  costs.backward_input = 1.0;
  costs.backward_weight = 0.5;
  const VerifyResult result = VerifyOk(GpipeProgram(4, 8), costs);
  EXPECT_NEAR(result.makespan, 11 * 2.25, 1e-12);
  EXPECT_NEAR(result.bubble_fraction, 3.0 / 11.0, 1e-12);
}

TEST(GpipeVerifyTest, TimelineHoldsEveryInstructionOnceInStageOrderWithoutOverlap) {
  const Program program = GpipeProgram(3, 4);
  const VerifyResult result = VerifyOk(program);
  size_t total = 0;
  for (const StageProgram& stage : program.stage_programs) total += stage.instructions.size();
  ASSERT_EQ(result.timeline.size(), total);
  size_t at = 0;
  for (int s = 0; s < 3; ++s) {
    double clock = 0;
    for (int i = 0; i < static_cast<int>(program.stage_programs[s].instructions.size()); ++i) {
      const TimelineEntry& entry = result.timeline[at++];
      EXPECT_EQ(entry.stage, s);
      EXPECT_EQ(entry.index, i);
      EXPECT_GE(entry.start, clock) << "stage " << s << " #" << i;
      EXPECT_GE(entry.end, entry.start);
      clock = entry.end;
      const Instruction& instruction = program.stage_programs[s].instructions[i];
      if (std::holds_alternative<Forward>(instruction)) {
        EXPECT_DOUBLE_EQ(entry.end - entry.start, 1.0);
      }
      if (std::holds_alternative<Backward>(instruction)) {
        EXPECT_DOUBLE_EQ(entry.end - entry.start, 2.0);
      }
    }
  }
}

// Two stages, two micro-batches, F = 1, B = 2 (the grid test draws the same run):
//   stage 0: F0 [0,1] F1 [1,2]                 B1 [5,7] B0 [7,9]
//   stage 1:          F0 [1,2] F1 [2,3] B1 [3,5] B0 [5,7]
TEST(GpipeVerifyTest, TwoStageTimelineHasExpectedComputeTimes) {
  const Program program = GpipeProgram(2, 2);
  const VerifyResult result = VerifyOk(program);
  struct Expected {
    int stage;
    Instruction instruction;
    double start, end;
  };
  const std::vector<Expected> expected = {
      {0, Forward{0}, 0, 1}, {0, Forward{1}, 1, 2}, {0, Backward{1}, 5, 7}, {0, Backward{0}, 7, 9},
      {1, Forward{0}, 1, 2}, {1, Forward{1}, 2, 3}, {1, Backward{1}, 3, 5}, {1, Backward{0}, 5, 7},
  };
  for (const Expected& e : expected) {
    const int index = testing::IndexOf(program, e.stage, e.instruction);
    bool found = false;
    for (const TimelineEntry& entry : result.timeline) {
      if (entry.stage != e.stage || entry.index != index) continue;
      found = true;
      EXPECT_DOUBLE_EQ(entry.start, e.start) << ToString(e.instruction) << " stage " << e.stage;
      EXPECT_DOUBLE_EQ(entry.end, e.end) << ToString(e.instruction) << " stage " << e.stage;
    }
    EXPECT_TRUE(found) << ToString(e.instruction) << " stage " << e.stage;
  }
  EXPECT_DOUBLE_EQ(result.makespan, 9);
}

TEST(GpipeVerifyTest, PerStageCostsSetTheCriticalPath) {
  OpCosts costs;
  costs.stage_forward = {1, 3};
  costs.stage_backward_input = {1.5, 4};
  costs.stage_backward_weight = {0.5, 2};
  // stage 1: F0 [1,4] F1 [4,7] B1 [7,13] B0 [13,19]; stage 0: B1 [13,15] B0 [19,21].
  const VerifyResult result = VerifyOk(GpipeProgram(2, 2), costs);
  EXPECT_DOUBLE_EQ(result.makespan, 21);
  EXPECT_DOUBLE_EQ(result.stage_bubble[0], (21.0 - 6.0) / 21.0);
  EXPECT_DOUBLE_EQ(result.stage_bubble[1], (21.0 - 18.0) / 21.0);
  EXPECT_DOUBLE_EQ(result.bubble_fraction, ((15.0 + 3.0) / 21.0) / 2.0);
}

TEST(GpipeVerifyTest, TransferLatencyDelaysEveryHop) {
  OpCosts costs;
  costs.send = 0.5;
  // One micro-batch: K forwards and K backwards in a chain, 2(K-1) hops of 0.5.
  for (int k = 1; k <= 6; ++k) {
    const VerifyResult result = VerifyOk(GpipeProgram(k, 1), costs);
    EXPECT_DOUBLE_EQ(result.makespan, k * 3.0 + 2 * (k - 1) * 0.5) << "K=" << k;
  }
}

TEST(GpipeVerifyTest, LoadTimeCountsAsIdleNotCompute) {
  OpCosts costs;
  costs.load = 0.5;
  const VerifyResult result = VerifyOk(GpipeProgram(1, 2), costs);
  EXPECT_DOUBLE_EQ(result.makespan, 2 * 0.5 + 2 * 3.0);
  EXPECT_DOUBLE_EQ(result.bubble_fraction, 1.0 / 7.0);
}

TEST(GpipeVerifyTest, ZeroCostsGiveZeroMakespanAndBubble) {
  OpCosts costs;
  costs.forward = 0;
  costs.backward_input = 0;
  costs.backward_weight = 0;
  const VerifyResult result = VerifyOk(GpipeProgram(3, 2), costs);
  EXPECT_EQ(result.makespan, 0);
  EXPECT_EQ(result.bubble_fraction, 0);
}

TEST(VerifyCostsTest, RejectsNegativeCost) {
  OpCosts costs;
  costs.backward_weight = -1;
  const absl::StatusOr<VerifyResult> result = VerifyProgram(GpipeProgram(2, 2), costs);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(result.status().message()),
              HasSubstr("costs.backward_weight is -1; costs must be finite and >= 0"));
}

TEST(VerifyCostsTest, RejectsNonFiniteCost) {
  OpCosts costs;
  costs.stage_forward = {1, std::nan("")};
  const absl::StatusOr<VerifyResult> result = VerifyProgram(GpipeProgram(2, 2), costs);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("costs.stage_forward[1] is nan"));
}

TEST(VerifyCostsTest, RejectsPerStageCostsOfWrongLength) {
  OpCosts costs;
  costs.stage_backward_input = {1, 2, 3};
  const absl::StatusOr<VerifyResult> result = VerifyProgram(GpipeProgram(2, 2), costs);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(std::string(result.status().message()),
              HasSubstr("costs.stage_backward_input has 3 entries but the program has 2 virtual "
                        "stages (2 stages x 1 chunk(s)): give one per virtual stage (index = "
                        "virtual stage), or none"));
}

// Two stages with two chunks each (virtual stages 0..3 = (s0,c0), (s1,c0), (s0,c1), (s1,c1)),
// fill-drain over the virtual pipeline: how an interleaved builder's output will be checked.
Program TwoChunkProgram() {
  Program program;
  program.stages = 2;
  program.micro_batches = 2;
  program.chunks = 2;
  program.stage_programs.resize(2);
  program.stage_programs[0] = {
      0, {LoadMicroBatch{0, 0}, Forward{0, 0},        SendActivation{0, 0}, LoadMicroBatch{1, 0},
          Forward{1, 0},        SendActivation{1, 0}, RecvActivation{0, 1}, Forward{0, 1},
          SendActivation{0, 1}, RecvActivation{1, 1}, Forward{1, 1},        SendActivation{1, 1},
          RecvGrad{1, 1},       Backward{1, 1},       SendGrad{1, 1},       RecvGrad{0, 1},
          Backward{0, 1},       SendGrad{0, 1},       RecvGrad{1, 0},       Backward{1, 0},
          RecvGrad{0, 0},       Backward{0, 0},       AllReduceGrads{},     OptimizerStep{}}};
  program.stage_programs[1] = {
      1, {RecvActivation{0, 0}, Forward{0, 0},        SendActivation{0, 0}, RecvActivation{1, 0},
          Forward{1, 0},        SendActivation{1, 0}, RecvActivation{0, 1}, LoadMicroBatch{0, 1},
          Forward{0, 1},        RecvActivation{1, 1}, LoadMicroBatch{1, 1}, Forward{1, 1},
          Backward{1, 1},       SendGrad{1, 1},       Backward{0, 1},       SendGrad{0, 1},
          RecvGrad{1, 0},       Backward{1, 0},       SendGrad{1, 0},       RecvGrad{0, 0},
          Backward{0, 0},       SendGrad{0, 0},       AllReduceGrads{},     OptimizerStep{}}};
  return program;
}

TEST(ChunkedVerifyTest, AcceptsVirtualStagePipelineAndCountsEveryChunk) {
  const VerifyResult result = VerifyOk(TwoChunkProgram());
  // Forwards end at 5 on stage 1; backwards chain through the 4 virtual stages: 5 + 4 * 2 + 2.
  EXPECT_DOUBLE_EQ(result.makespan, 15);
  EXPECT_EQ(result.peak_live_activations, (std::vector<int>{4, 4}));
  EXPECT_DOUBLE_EQ(result.stage_bubble[0], 3.0 / 15.0);
  EXPECT_DOUBLE_EQ(result.stage_bubble[1], 3.0 / 15.0);
}

TEST(ChunkedVerifyTest, RejectsChunkBeyondTheProgramsChunks) {
  Program program = TwoChunkProgram();
  program.chunks = 1;
  const absl::StatusOr<VerifyResult> result = VerifyProgram(program, OpCosts{});
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(std::string(result.status().message()),
              HasSubstr("stage 0, instruction #6 RecvActivation(mb=0, chunk=1): chunk 1 is out "
                        "of range: the program has 1 chunk(s) per stage (0..0)"));
}

// With chunks, overrides are per virtual stage: one per (stage, chunk), not one per stage.
TEST(VerifyCostsTest, PerVirtualStageCostsNeedOnePerChunkOfEveryStage) {
  OpCosts costs;
  costs.stage_forward = {1, 1};
  const absl::StatusOr<VerifyResult> result = VerifyProgram(TwoChunkProgram(), costs);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(std::string(result.status().message()),
              HasSubstr("costs.stage_forward has 2 entries but the program has 4 virtual stages "
                        "(2 stages x 2 chunk(s))"));
}

// Chunk 1 of stage 0 (virtual stage 2) is slow: only its forwards and backwards take longer.
TEST(VerifyCostsTest, PerVirtualStageCostsApplyToTheirChunkOnly) {
  OpCosts costs;
  costs.stage_forward = {1, 1, 3, 1};
  costs.stage_backward_input = {1, 1, 2, 1};
  costs.stage_backward_weight = {1, 1, 2, 1};
  const Program program = TwoChunkProgram();
  const VerifyResult result = VerifyOk(program, costs);
  for (const TimelineEntry& entry : result.timeline) {
    const Instruction& instruction = program.stage_programs[entry.stage].instructions[entry.index];
    const bool slow = entry.stage == 0 && ChunkOf(instruction) == 1;
    if (std::holds_alternative<Forward>(instruction)) {
      EXPECT_DOUBLE_EQ(entry.end - entry.start, slow ? 3 : 1) << ToString(instruction);
    }
    if (std::holds_alternative<Backward>(instruction)) {
      EXPECT_DOUBLE_EQ(entry.end - entry.start, slow ? 4 : 2) << ToString(instruction);
    }
  }
}

}  // namespace
}  // namespace gpipe::schedule

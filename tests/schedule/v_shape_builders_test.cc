// ZERO_BUBBLE_V and DUALPIPE_V (zero_bubble_v_builder.h, dualpipe_v_builder.h): two chunks per
// rank in a V, every program verified (matching under MPI and NCCL, no deadlock), F and the
// backward parts in micro-batch order on every chunk, the memory bounds the headers state, and the
// simulator's unit-cost table beside 1F1B, ZB-H1 and interleaved 1F1B at K = 4, 8 and
// M = 8, 16, 32 (printed; the orderings it shows are asserted).
#include <algorithm>
#include <cstdio>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "runtime/schedule/dualpipe_v_builder.h"
#include "runtime/schedule/zero_bubble_v_builder.h"
#include "tests/schedule/schedule_test_util.h"

namespace gpipe::schedule {
namespace {

using ::gpipe::schedule::testing::Ascending;
using ::gpipe::schedule::testing::BuildOk;
using ::gpipe::schedule::testing::MicroBatchOrder;
using ::gpipe::schedule::testing::ShapeName;
using ::gpipe::schedule::testing::VerifyOrFail;

// Costs in units of a whole stage's forward: each of v chunks does 1/v of the work.
OpCosts ChunkCosts(int chunks) {
  const double share = 1.0 / chunks;
  return OpCosts{.forward = share, .backward_input = share, .backward_weight = share};
}

TEST(VShapeBuildersTest, RankZeroHoldsTheFirstAndLastStageAndTheTurnIsLocal) {
  for (pb::Schedule kind : {pb::ZERO_BUBBLE_V, pb::DUALPIPE_V}) {
    const Program program = BuildOk(kind, 4, 8, 2);
    EXPECT_EQ(program.kind, kind);
    EXPECT_EQ(program.chunks, 2);
    EXPECT_EQ(program.placement, pb::V_SHAPE);
    const Topology topology = program.topology();
    EXPECT_EQ(topology.At(0), (StageChunk{0, 0}));
    EXPECT_EQ(topology.At(7), (StageChunk{0, 1}));
    EXPECT_EQ(topology.At(3), (StageChunk{3, 0}));
    EXPECT_EQ(topology.At(4), (StageChunk{3, 1}));
    // Rank 0 loads inputs on chunk 0 and targets on chunk 1; rank 3 hands chunk 0's output to
    // chunk 1 and chunk 1's input gradient back to chunk 0 (a link from the stage to itself).
    const std::vector<Instruction>& first = program.stage_programs[0].instructions;
    EXPECT_NE(std::find(first.begin(), first.end(), Instruction{LoadMicroBatch{0, 1}}),
              first.end());
    const std::vector<Instruction>& turn = program.stage_programs[3].instructions;
    const auto send = std::find(turn.begin(), turn.end(), Instruction{SendActivation{0, 0}});
    const auto recv = std::find(turn.begin(), turn.end(), Instruction{RecvActivation{0, 1}});
    ASSERT_NE(send, turn.end());
    ASSERT_NE(recv, turn.end());
    EXPECT_LT(send, recv);
    VerifyOrFail(program);
  }
}

// Every shape up to K = 8, M = 32 verifies; F, I (or B) and W go in micro-batch order on every
// chunk; ZERO_BUBBLE_V holds at most min(2K, 2M) chunk micro-batches on every rank and DUALPIPE_V
// at most 2K + 1 (its last rank, before the first backward of phase 4), min(2K, 2M) when it
// degenerates to ZERO_BUBBLE_V's order (M < 2K, with the same instructions).
TEST(VShapeBuildersTest, EveryShapeVerifiesInOrderWithinItsMemoryBound) {
  for (int k = 1; k <= 8; ++k) {
    for (int m = 1; m <= 32; ++m) {
      for (pb::Schedule kind : {pb::ZERO_BUBBLE_V, pb::DUALPIPE_V}) {
        SCOPED_TRACE(ShapeName(kind, k, m, 2));
        const Program program = BuildOk(kind, k, m, 2);
        const VerifyResult result = VerifyOrFail(program);
        const bool phases = kind == pb::DUALPIPE_V && !DualPipeVDegenerates(k, m);
        const int bound = phases ? 2 * k + 1 : ZeroBubbleVLiveCap(k, m);
        EXPECT_LE(*std::max_element(result.peak_live_activations.begin(),
                                    result.peak_live_activations.end()),
                  bound);
        for (const StageProgram& stage : program.stage_programs) {
          const std::vector<std::vector<int>> in_order(2, Ascending(m));
          EXPECT_EQ(MicroBatchOrder<Forward>(stage, 2), in_order);
          std::vector<std::vector<int>> backward = MicroBatchOrder<Backward>(stage, 2);
          const std::vector<std::vector<int>> input = MicroBatchOrder<BackwardInput>(stage, 2);
          std::vector<std::vector<int>> weight = MicroBatchOrder<BackwardWeight>(stage, 2);
          for (int c = 0; c < 2; ++c) {
            // A chunk's backwards, whole or split, in micro-batch order; its W's too.
            std::vector<int> all;
            size_t whole = 0, split = 0;
            for (const Instruction& instruction : stage.instructions) {
              if (const auto* b = std::get_if<Backward>(&instruction); b && b->chunk == c) {
                all.push_back(b->micro_batch);
                ++whole;
              } else if (const auto* i = std::get_if<BackwardInput>(&instruction);
                         i && i->chunk == c) {
                all.push_back(i->micro_batch);
                ++split;
              }
            }
            EXPECT_EQ(all, Ascending(m));
            EXPECT_EQ(whole, backward[c].size());
            EXPECT_EQ(split, input[c].size());
            EXPECT_EQ(weight[c], input[c]);
          }
        }
        if (kind == pb::DUALPIPE_V && DualPipeVDegenerates(k, m)) {
          const Program zbv = BuildOk(pb::ZERO_BUBBLE_V, k, m, 2);
          for (int s = 0; s < k; ++s) {
            EXPECT_EQ(program.stage_programs[s].instructions, zbv.stage_programs[s].instructions);
          }
        }
      }
    }
  }
}

TEST(VShapeBuildersTest, DualPipeVPhasesOnTwoRanks) {
  // K = 2, M = 4, phase by phase. Rank 0: F0 F0 | F0 F1 | I1 W F1 | F0 B1 F1 B0 | B1 F1 B0 |
  // B1 I0 | W I0 | W. Rank 1: - | F0 F1 F0 F1 | - | F0 B1 F1 B0 F0 B1 F1 B0 | - | B1 B0 I1 I0 |
  // - | W W (phase 6 splits from its middle iteration: before B1 on odd ranks, before B0 on
  // even ones).
  const std::vector<std::vector<ChunkOp>> orders = DualPipeVOrder(2, 4);
  using P = ChunkPass;
  EXPECT_EQ(orders[0], (std::vector<ChunkOp>{{P::kForward, 0, 0},
                                             {P::kForward, 0, 1},
                                             {P::kForward, 0, 2},
                                             {P::kForward, 1, 0},
                                             {P::kBackwardInput, 1, 0},
                                             {P::kBackwardWeight, 1, 0},
                                             {P::kForward, 1, 1},
                                             {P::kForward, 0, 3},
                                             {P::kBackward, 1, 1},
                                             {P::kForward, 1, 2},
                                             {P::kBackward, 0, 0},
                                             {P::kBackward, 1, 2},
                                             {P::kForward, 1, 3},
                                             {P::kBackward, 0, 1},
                                             {P::kBackward, 1, 3},
                                             {P::kBackwardInput, 0, 2},
                                             {P::kBackwardWeight, 0, 2},
                                             {P::kBackwardInput, 0, 3},
                                             {P::kBackwardWeight, 0, 3}}));
  EXPECT_EQ(orders[1], (std::vector<ChunkOp>{{P::kForward, 0, 0},
                                             {P::kForward, 1, 0},
                                             {P::kForward, 0, 1},
                                             {P::kForward, 1, 1},
                                             {P::kForward, 0, 2},
                                             {P::kBackward, 1, 0},
                                             {P::kForward, 1, 2},
                                             {P::kBackward, 0, 0},
                                             {P::kForward, 0, 3},
                                             {P::kBackward, 1, 1},
                                             {P::kForward, 1, 3},
                                             {P::kBackward, 0, 1},
                                             {P::kBackward, 1, 2},
                                             {P::kBackward, 0, 2},
                                             {P::kBackwardInput, 1, 3},
                                             {P::kBackwardInput, 0, 3},
                                             {P::kBackwardWeight, 1, 3},
                                             {P::kBackwardWeight, 0, 3}}));
}

// The simulator's table: unit-cost makespan and bubble (F = I = W = one stage's share per chunk,
// free transfers) and the fullest stage's live micro-batches in stage units.
TEST(VShapeBuildersTest, SimulatorTableBesideOneFOneBZeroBubbleH1AndInterleaved) {
  struct Row {
    pb::Schedule kind;
    int chunks;
  };
  const Row rows[] = {{pb::ONE_F_ONE_B, 1},
                      {pb::ZERO_BUBBLE_H1, 1},
                      {pb::INTERLEAVED_1F1B, 2},
                      {pb::ZERO_BUBBLE_V, 2},
                      {pb::DUALPIPE_V, 2}};
  std::printf("%-18s %3s %3s %9s %8s %12s\n", "schedule", "K", "M", "makespan", "bubble",
              "peak stages");
  for (int k : {4, 8}) {
    for (int m : {8, 16, 32}) {
      double h1 = 0, zbv = 0, one_f_one_b = 0;
      for (const Row& row : rows) {
        const Program program = BuildOk(row.kind, k, m, row.chunks);
        const VerifyResult result = VerifyOrFail(program, ChunkCosts(row.chunks));
        const int peak = *std::max_element(result.peak_live_activations.begin(),
                                           result.peak_live_activations.end());
        std::printf("%-18s %3d %3d %9.2f %7.1f%% %12.1f\n", pb::Schedule_Name(row.kind).c_str(), k,
                    m, result.makespan, 100 * result.bubble_fraction,
                    static_cast<double>(peak) / row.chunks);
        if (row.kind == pb::ZERO_BUBBLE_H1) h1 = result.makespan;
        if (row.kind == pb::ZERO_BUBBLE_V) zbv = result.makespan;
        if (row.kind == pb::ONE_F_ONE_B) one_f_one_b = result.makespan;
      }
      SCOPED_TRACE(absl::StrFormat("K=%d M=%d", k, m));
      // ZERO_BUBBLE_V's ramp is half of ZB-H1's K - 1: its first and last stages share rank 0.
      EXPECT_DOUBLE_EQ(zbv, 3.0 * m + (k - 1) / 2.0);
      EXPECT_DOUBLE_EQ(h1, 3.0 * m + k - 1);
      EXPECT_LT(zbv, one_f_one_b);
    }
  }
}

}  // namespace
}  // namespace gpipe::schedule

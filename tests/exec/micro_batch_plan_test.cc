// MicroBatchPlan's decisions from a stage's instructions: which micro-batches keep their
// activations, which stage inputs go to host memory under pipeline.offload, and where each comes
// back (one compute instruction before its backward).
#include "runtime/exec/micro_batch_plan.h"

#include <map>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/schedule/build_program.h"

namespace gpipe {
namespace {

using schedule::Backward;
using schedule::BackwardInput;
using schedule::BackwardWeight;
using schedule::Forward;
using schedule::Instruction;
using Slot = MicroBatchPlan::Slot;

schedule::StageProgram ProgramOf(std::vector<Instruction> instructions) {
  return schedule::StageProgram{.stage = 0, .instructions = std::move(instructions)};
}

// Instruction index -> the slots whose copy back starts before it.
std::map<size_t, std::vector<std::pair<int, int>>> Restores(const MicroBatchPlan& plan,
                                                            size_t instructions) {
  std::map<size_t, std::vector<std::pair<int, int>>> out;
  for (size_t i = 0; i <= instructions; ++i) {  // one past the end: empty
    for (const Slot& slot : plan.RestoresBefore(i))
      out[i].push_back({slot.chunk, slot.micro_batch});
  }
  return out;
}

TEST(MicroBatchPlanTest, GPipeOffloadsAllButTheLastAndRestoresOneInstructionAhead) {
  // F0 F1 F2 F3 B3 B2 B1 B0 (indices 0..7).
  const schedule::StageProgram program =
      ProgramOf({Forward{0, 0}, Forward{1, 0}, Forward{2, 0}, Forward{3, 0}, Backward{3, 0},
                 Backward{2, 0}, Backward{1, 0}, Backward{0, 0}, schedule::OptimizerStep{}});
  for (const pb::Remat remat : {pb::ALWAYS, pb::EXCEPT_LAST}) {
    SCOPED_TRACE(pb::Remat_Name(remat));
    const MicroBatchPlan plan(program, 1, 4, remat, pb::STAGE_INPUTS);
    EXPECT_TRUE(plan.Offloads(0, 0));
    EXPECT_TRUE(plan.Offloads(0, 1));
    EXPECT_TRUE(plan.Offloads(0, 2));
    EXPECT_FALSE(plan.Offloads(0, 3)) << "its backward follows its forward";
    EXPECT_EQ(plan.KeepsActivations(0, 3), remat == pb::EXCEPT_LAST);
    const std::map<size_t, std::vector<std::pair<int, int>>> expected = {
        {4, {{0, 2}}}, {5, {{0, 1}}}, {6, {{0, 0}}}};
    EXPECT_EQ(Restores(plan, program.instructions.size()), expected);
  }
}

TEST(MicroBatchPlanTest, NothingMovesWithoutOffloadRematOrBackward) {
  const schedule::StageProgram training =
      ProgramOf({Forward{0, 0}, Forward{1, 0}, Forward{2, 0}, Backward{2, 0}, Backward{1, 0},
                 Backward{0, 0}, schedule::OptimizerStep{}});
  const schedule::StageProgram eval =
      ProgramOf({Forward{0, 0}, Forward{1, 0}, Forward{2, 0}, schedule::ReportEval{}});
  const struct {
    const schedule::StageProgram& program;
    pb::Remat remat;
    pb::Offload offload;
  } cases[] = {{training, pb::ALWAYS, pb::KEEP_ON_DEVICE},
               {training, pb::NEVER, pb::STAGE_INPUTS},
               {eval, pb::ALWAYS, pb::STAGE_INPUTS}};
  for (const auto& c : cases) {
    const MicroBatchPlan plan(c.program, 1, 3, c.remat, c.offload);
    for (int m = 0; m < 3; ++m) EXPECT_FALSE(plan.Offloads(0, m)) << m;
    EXPECT_TRUE(Restores(plan, c.program.instructions.size()).empty());
  }
}

TEST(MicroBatchPlanTest, OneFOneBOffloadsOnlyWhatWaitsTwoInstructions) {
  // F0 F1 B0 F2 B1 F3 B2 B3: m0 and m3 have one compute instruction between forward and
  // backward; m1 (B0 F2) and m2 (B1 F3) have two.
  const schedule::StageProgram program =
      ProgramOf({Forward{0, 0}, Forward{1, 0}, Backward{0, 0}, Forward{2, 0}, Backward{1, 0},
                 Forward{3, 0}, Backward{2, 0}, Backward{3, 0}, schedule::OptimizerStep{}});
  const MicroBatchPlan plan(program, 1, 4, pb::ALWAYS, pb::STAGE_INPUTS);
  EXPECT_FALSE(plan.Offloads(0, 0));
  EXPECT_TRUE(plan.Offloads(0, 1));
  EXPECT_TRUE(plan.Offloads(0, 2));
  EXPECT_FALSE(plan.Offloads(0, 3));
  const std::map<size_t, std::vector<std::pair<int, int>>> expected = {{3, {{0, 1}}},
                                                                       {5, {{0, 2}}}};
  EXPECT_EQ(Restores(plan, program.instructions.size()), expected);
}

TEST(MicroBatchPlanTest, SplitBackwardRestoresBeforeTheWeightHalfThatPrecedesIt) {
  // F0 F1 F2 I2 W2 I1 W1 I0 W0: W1 (index 6) is the compute instruction before I0.
  const schedule::StageProgram program =
      ProgramOf({Forward{0, 0}, Forward{1, 0}, Forward{2, 0}, BackwardInput{2, 0},
                 BackwardWeight{2, 0}, BackwardInput{1, 0}, BackwardWeight{1, 0},
                 BackwardInput{0, 0}, BackwardWeight{0, 0}, schedule::OptimizerStep{}});
  const MicroBatchPlan plan(program, 1, 3, pb::ALWAYS, pb::STAGE_INPUTS);
  EXPECT_TRUE(plan.Offloads(0, 0));
  EXPECT_TRUE(plan.Offloads(0, 1));
  EXPECT_FALSE(plan.Offloads(0, 2));
  const std::map<size_t, std::vector<std::pair<int, int>>> expected = {{4, {{0, 1}}},
                                                                       {6, {{0, 0}}}};
  EXPECT_EQ(Restores(plan, program.instructions.size()), expected);
}

// On every built-in training schedule, each offloaded micro-batch comes back exactly once,
// after its Forward and before its backward, and nothing else is restored.
TEST(MicroBatchPlanTest, EveryScheduleRestoresEachOffloadedInputOnceBetweenItsPasses) {
  const struct {
    pb::Schedule kind;
    int chunks;
  } schedules[] = {{pb::GPIPE, 1},          {pb::ONE_F_ONE_B, 1},    {pb::INTERLEAVED_1F1B, 2},
                   {pb::ZERO_BUBBLE_H1, 1}, {pb::ZERO_BUBBLE_H2, 1}, {pb::ZERO_BUBBLE_V, 2},
                   {pb::DUALPIPE_V, 2}};
  constexpr int kStages = 4, kMicroBatches = 8;
  for (const auto& s : schedules) {
    absl::StatusOr<schedule::Program> program =
        schedule::BuildProgram(s.kind, kStages, kMicroBatches, s.chunks);
    ASSERT_TRUE(program.ok()) << program.status();
    int offloaded = 0;
    for (const schedule::StageProgram& stage : program->stage_programs) {
      SCOPED_TRACE(absl::StrCat(pb::Schedule_Name(s.kind), " stage ", stage.stage));
      const MicroBatchPlan plan(stage, s.chunks, kMicroBatches, pb::ALWAYS, pb::STAGE_INPUTS);
      std::map<std::pair<int, int>, size_t> forward_at, backward_at;
      for (size_t i = 0; i < stage.instructions.size(); ++i) {
        const Instruction& instruction = stage.instructions[i];
        const std::pair<int, int> key{schedule::ChunkOf(instruction),
                                      schedule::MicroBatchOf(instruction).value_or(-1)};
        if (std::holds_alternative<Forward>(instruction)) forward_at[key] = i;
        if (std::holds_alternative<Backward>(instruction) ||
            std::holds_alternative<BackwardInput>(instruction)) {
          backward_at[key] = i;
        }
      }
      std::map<std::pair<int, int>, int> restored;
      for (const auto& [index, slots] : Restores(plan, stage.instructions.size())) {
        for (const std::pair<int, int>& slot : slots) {
          ++restored[slot];
          EXPECT_TRUE(plan.Offloads(slot.first, slot.second));
          EXPECT_GT(index, forward_at.at(slot));
          EXPECT_LT(index, backward_at.at(slot));
        }
      }
      for (const auto& [slot, at] : forward_at) {
        EXPECT_EQ(restored[slot], plan.Offloads(slot.first, slot.second) ? 1 : 0)
            << "chunk " << slot.first << " micro-batch " << slot.second;
        offloaded += plan.Offloads(slot.first, slot.second);
      }
    }
    // Every schedule keeps several micro-batches in flight on its first stage.
    EXPECT_GT(offloaded, 0) << pb::Schedule_Name(s.kind);
  }
}

}  // namespace
}  // namespace gpipe

// CompileCustomProgram: a hand-written schedule compiles to exactly what the builders emit, every
// built-in schedule survives export (ScheduleCsv) and import, and a corpus of wrong schedules is
// refused naming the row, the action and the rule.
#include "runtime/schedule/custom_program.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/schedule/build_program.h"
#include "runtime/schedule/schedule_csv.h"
#include "tests/schedule/schedule_test_util.h"

namespace gpipe::schedule {
namespace {

using ::gpipe::schedule::testing::BuildOk;
using ::gpipe::schedule::testing::ShapeName;
using ::gpipe::schedule::testing::Strings;
using ::testing::HasSubstr;

ActionTable Rows(const std::vector<std::string>& rows) {
  ActionTable table;
  for (size_t r = 0; r < rows.size(); ++r) {
    absl::StatusOr<ActionRow> row = ParseActionText(rows[r], "row" + std::to_string(r));
    EXPECT_TRUE(row.ok()) << row.status();
    table.push_back(row.ok() ? *std::move(row) : ActionRow{});
  }
  return table;
}

std::string CompileError(const std::vector<std::string>& rows, int micro_batches) {
  absl::StatusOr<Program> program = CompileCustomProgram(Rows(rows), micro_batches);
  EXPECT_FALSE(program.ok());
  return program.ok() ? std::string() : std::string(program.status().message());
}

void ExpectSameInstructions(const Program& got, const Program& want, const std::string& name) {
  ASSERT_EQ(got.stages, want.stages) << name;
  ASSERT_EQ(got.chunks, want.chunks) << name;
  EXPECT_EQ(got.micro_batches, want.micro_batches) << name;
  for (int s = 0; s < want.stages; ++s) {
    EXPECT_EQ(Strings(got.stage_programs[s]), Strings(want.stage_programs[s]))
        << name << ", stage " << s;
  }
}

TEST(CustomProgramTest, HandWrittenOneFOneBEqualsTheBuilderInstructionForInstruction) {
  absl::StatusOr<Program> program = CompileCustomProgram(
      Rows({"0F0 0F1 0B0 0F2 0B1 0F3 0B2 0B3", "1F0 1B0 1F1 1B1 1F2 1B2 1F3 1B3"}), 4);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->kind, pb::CUSTOM);
  ExpectSameInstructions(*program, BuildOk(pb::ONE_F_ONE_B, 2, 4), "1F1B K=2 M=4");
}

TEST(CustomProgramTest, LoopedPlacementSetsTheChunks) {
  // K = 2, V = 4: rank 0 holds stages 0 and 2, rank 1 holds 1 and 3 (fill-drain order).
  absl::StatusOr<Program> program =
      CompileCustomProgram(Rows({"0F0 2F0 2B0 0B0", "1F0 3F0 3B0 1B0"}), 1);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->stages, 2);
  EXPECT_EQ(program->chunks, 2);
  EXPECT_EQ(Strings(program->stage_programs[0]),
            (std::vector<std::string>{"LoadMicroBatch(mb=0)", "Forward(mb=0)",
                                      "SendActivation(mb=0)", "RecvActivation(mb=0, chunk=1)",
                                      "Forward(mb=0, chunk=1)", "SendActivation(mb=0, chunk=1)",
                                      "RecvGrad(mb=0, chunk=1)", "Backward(mb=0, chunk=1)",
                                      "SendGrad(mb=0, chunk=1)", "RecvGrad(mb=0)", "Backward(mb=0)",
                                      "AllReduceGrads", "OptimizerStep"}));
}

TEST(CustomProgramTest, EveryBuiltInScheduleSurvivesExportAndImport) {
  struct Shape {
    pb::Schedule kind;
    int stages, micro_batches, virtual_stages;
  };
  std::vector<Shape> shapes;
  for (pb::Schedule kind : {pb::GPIPE, pb::ONE_F_ONE_B, pb::ZERO_BUBBLE_H1, pb::ZERO_BUBBLE_H2}) {
    for (int k = 1; k <= 5; ++k) {
      for (int m = 1; m <= 9; ++m) shapes.push_back({kind, k, m, 1});
    }
  }
  for (int k : {2, 3, 4}) {
    for (int v : {2, 3}) {
      for (int m = k; m <= 3 * k; m += k) shapes.push_back({pb::INTERLEAVED_1F1B, k, m, v});
    }
  }
  for (pb::Schedule kind : {pb::ZERO_BUBBLE_V, pb::DUALPIPE_V}) {
    for (int k = 1; k <= 5; ++k) {
      for (int m = 1; m <= 12; ++m) shapes.push_back({kind, k, m, 2});
    }
  }
  for (const Shape& shape : shapes) {
    const std::string name =
        ShapeName(shape.kind, shape.stages, shape.micro_batches, shape.virtual_stages);
    const Program built =
        BuildOk(shape.kind, shape.stages, shape.micro_batches, shape.virtual_stages);
    absl::StatusOr<std::string> csv = ScheduleCsv(built);
    ASSERT_TRUE(csv.ok()) << name << ": " << csv.status();
    absl::StatusOr<ActionTable> table = ParseScheduleCsv(*csv, "exported.csv");
    ASSERT_TRUE(table.ok()) << name << ": " << table.status();
    absl::StatusOr<Program> imported = CompileCustomProgram(*table, shape.micro_batches);
    ASSERT_TRUE(imported.ok()) << name << ": " << imported.status() << "\n" << *csv;
    ExpectSameInstructions(*imported, built, name);
    // On one rank LOOPED and V_SHAPE put every virtual stage in the same place; LOOPED is found.
    if (shape.stages > 1) {
      EXPECT_EQ(imported->placement, built.placement) << name;
    }
  }
}

TEST(CustomProgramTest, ExportWritesOneRowPerStage) {
  absl::StatusOr<std::string> csv = ScheduleCsv(BuildOk(pb::ONE_F_ONE_B, 2, 2));
  ASSERT_TRUE(csv.ok()) << csv.status();
  EXPECT_EQ(*csv, "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
}

TEST(CustomProgramTest, BuildPipelineProgramCompilesTheInlineActions) {
  pb::Pipeline pipeline;
  pipeline.set_schedule(pb::CUSTOM);
  pipeline.set_stages(2);
  pipeline.set_micro_batches(2);
  pipeline.set_virtual_stages(1);
  pipeline.mutable_custom()->add_ranks()->set_actions("0F0 0F1 0B0 0B1");
  pipeline.mutable_custom()->add_ranks()->set_actions("1F0,1B0,1F1,1B1");
  absl::StatusOr<Program> program = BuildPipelineProgram(pipeline);
  ASSERT_TRUE(program.ok()) << program.status();
  ExpectSameInstructions(*program, BuildOk(pb::ONE_F_ONE_B, 2, 2), "1F1B K=2 M=2");
}

// The invalid corpus: each schedule is refused with its message.

TEST(CustomProgramRejectsTest, MissingBackward) {
  // The backward that waits for the missing one is named first.
  EXPECT_EQ(CompileError({"0F0 0B0", "1F0"}, 1),
            "row0: action 1 (0B0): micro-batch 0's gradient for stage 0 comes from stage 1, whose "
            "backward (1B0, or 1I0 then 1W0) is never scheduled");
  // On stage 0 nothing waits for it: the forward whose backward is missing.
  EXPECT_EQ(CompileError({"0F0", "1F0 1B0"}, 1),
            "row0: action 0 (0F0): micro-batch 0 is forwarded on stage 0 but its backward (0B0, "
            "or 0I0 then 0W0) is never scheduled");
}

TEST(CustomProgramRejectsTest, WeightGradientBeforeInputGradient) {
  EXPECT_EQ(CompileError({"0F0 0W0 0I0"}, 1),
            "row0: action 1 (0W0): comes before its input gradient 0I0 (W computes what I "
            "defers): move it after 0I0");
}

TEST(CustomProgramRejectsTest, InputGradientWithoutWeightGradient) {
  EXPECT_EQ(CompileError({"0F0 0I0"}, 1),
            "row0: action 1 (0I0): its weight gradient 0W0 is never scheduled: add it after the I");
}

TEST(CustomProgramRejectsTest, DeadlockUnderEveryTransport) {
  // Rank 1 runs both forwards before a backward; rank 0 sends micro-batch 1 only after
  // micro-batch 0's backward, which waits for rank 1's.
  const std::string message = CompileError({"0F0 0B0 0F1 0B1", "1F0 1F1 1B0 1B1"}, 2);
  EXPECT_EQ(message,
            "row0: action 1 (0B0): deadlock: no stage can progress; row0: action 1 (0B0) [rank 0, "
            "instruction #3] RecvGrad(mb=0) waits for row1: action 2 (1B0) [rank 1, instruction "
            "#7] SendGrad(mb=0); row1: action 1 (1F1) [rank 1, instruction #3] "
            "RecvActivation(mb=1) waits for row0: action 2 (0F1) [rank 0, instruction #7] "
            "SendActivation(mb=1). Reorder the lists so every receive's send comes first.");
}

TEST(CustomProgramRejectsTest, ReceivesOutOfSendOrder) {
  const std::string message = CompileError({"0F0 0B0 0F1 0B1", "1F1 1B1 1F0 1B0"}, 2);
  EXPECT_THAT(message, HasSubstr("row1: action 0 (1F1) [rank 1, instruction #0] "
                                 "RecvActivation(mb=1): receives activations from stage 0 in a "
                                 "different order than they are sent"));
}

TEST(CustomProgramTest, ReceivesMoveEarlierWhereNcclMatchingNeedsIt) {
  // K = 2, V = 4: rank 0 sends micro-batch 1's activation to rank 1 (0F1) before micro-batch 0's
  // gradient (2B0), and rank 1 consumes the gradient (1B0) before the activation (1F1). Each kind
  // is in order, so MPI (matching by tag) runs the consumers' order; NCCL would pair them by
  // issue order, so rank 1 posts the activation's receive first, right before the gradient's.
  const absl::StatusOr<Program> program = CompileCustomProgram(
      Rows({"0F0 2F0 0F1 2B0 0B0 2F1 2B1 0B1", "1F0 3F0 3B0 1B0 1F1 3F1 3B1 1B1"}), 2);
  ASSERT_TRUE(program.ok()) << program.status();
  const std::vector<Instruction>& rank1 = program->stage_programs[1].instructions;
  const auto at = [&](const Instruction& instruction) {
    return std::find(rank1.begin(), rank1.end(), instruction) - rank1.begin();
  };
  EXPECT_EQ(at(RecvActivation{1, 0}) + 1, at(RecvGrad{0, 0}));
  EXPECT_LT(at(RecvGrad{0, 0}), at(Backward{0, 0}));
}

TEST(CustomProgramRejectsTest, StageOnTwoRanks) {
  EXPECT_EQ(CompileError({"0F0 0B0", "0F0 1F0 1B0"}, 1),
            "row1: action 0 (0F0): stage 0 already runs on rank 0 (row0: action 0 (0F0)); each "
            "virtual stage runs on exactly one rank");
}

TEST(CustomProgramRejectsTest, MicroBatchOutOfRange) {
  EXPECT_EQ(CompileError({"0F0 0F2 0B0 0B2"}, 2),
            "row0: action 1 (0F2): micro-batch 2 is out of range: pipeline.micro_batches is 2, "
            "so the ids are 0 ... 1");
}

TEST(CustomProgramTest, VShapePlacementComesFromTheStageIds) {
  // Rank 0 holds stages 0 and 3, rank 1 holds 1 and 2: rank 1's turn is a local hand-off.
  const absl::StatusOr<Program> program =
      CompileCustomProgram(Rows({"0F0 3F0 3B0 0B0", "1F0 2F0 2B0 1B0"}), 1);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->placement, pb::V_SHAPE);
  EXPECT_EQ(program->chunks, 2);
}

TEST(CustomProgramRejectsTest, PlacementNeitherLoopedNorVShape) {
  // Rank 1 holds stages 0 and 3, rank 0 holds 1 and 2.
  const std::string message = CompileError({"1F0 2F0 2B0 1B0", "0F0 3F0 3B0 0B0"}, 1);
  EXPECT_THAT(message, HasSubstr("row1: action 0 (0F0): stage 0 runs on rank 1"));
  EXPECT_THAT(message, HasSubstr("stage->rank 0->1 1->0 2->0 3->1"));
  EXPECT_THAT(message, HasSubstr("placed LOOPED (rank r holds r, r + 2, r + 4, ...) or V_SHAPE "
                                 "(rank r holds r, 3 - r, 4 + r, ...)"));
}

TEST(CustomProgramRejectsTest, ForwardMissingOrRepeated) {
  EXPECT_EQ(CompileError({"0F0 0B0", "1F0 1B0 1F0"}, 1),
            "row1: action 2 (1F0): 1F0 is scheduled twice (first as action 0); every forward and "
            "backward runs once a step");
  EXPECT_EQ(CompileError({"0F0 0B0"}, 2),
            "micro-batch 1 of stage 0 is never forwarded: add 0F1 to the row that runs stage 0");
  EXPECT_EQ(CompileError({"0B0 0F0"}, 1),
            "row0: action 0 (0B0): comes before its forward 0F0 (a backward needs the forward's "
            "activations)");
}

TEST(CustomProgramRejectsTest, HugeStageIdIsRefusedBeforeAnyWork) {
  EXPECT_THAT(CompileError({"0F0 9999999F0"}, 4),
              HasSubstr("row0: action 1 (9999999F0): stage 9999999 x 4 micro-batches is more work "
                        "than a program may hold"));
}

TEST(CustomProgramRejectsTest, WholeAndSplitBackwardTogether) {
  EXPECT_EQ(CompileError({"0F0 0B0 0I0 0W0"}, 1),
            "row0: action 2 (0I0): micro-batch 0 of stage 0 has both a whole backward (B) and a "
            "split one (I then W); use one");
}

}  // namespace
}  // namespace gpipe::schedule

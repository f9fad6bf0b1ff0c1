#include "runtime/schedule/instruction.h"

#include "gtest/gtest.h"

namespace gpipe::schedule {
namespace {

TEST(InstructionTest, ToStringNamesKindAndMicroBatch) {
  EXPECT_EQ(ToString(LoadMicroBatch{0}), "LoadMicroBatch(mb=0)");
  EXPECT_EQ(ToString(RecvActivation{1}), "RecvActivation(mb=1)");
  EXPECT_EQ(ToString(Forward{3}), "Forward(mb=3)");
  EXPECT_EQ(ToString(SendActivation{4}), "SendActivation(mb=4)");
  EXPECT_EQ(ToString(RecvGrad{5}), "RecvGrad(mb=5)");
  EXPECT_EQ(ToString(Backward{6}), "Backward(mb=6)");
  EXPECT_EQ(ToString(SendGrad{17}), "SendGrad(mb=17)");
  EXPECT_EQ(ToString(AllReduceGrads{}), "AllReduceGrads");
  EXPECT_EQ(ToString(OptimizerStep{}), "OptimizerStep");
}

TEST(InstructionTest, ZeroBubbleAndEvalInstructionsHaveTheirOwnNames) {
  EXPECT_EQ(ToString(BackwardInput{2}), "BackwardInput(mb=2)");
  EXPECT_EQ(ToString(BackwardWeight{2, 1}), "BackwardWeight(mb=2, chunk=1)");
  EXPECT_EQ(ToString(ReportEval{}), "ReportEval");
  EXPECT_EQ(MicroBatchOf(BackwardWeight{5}), 5);
  EXPECT_EQ(MicroBatchOf(ReportEval{}), std::nullopt);
  EXPECT_NE(Instruction(BackwardInput{1}), Instruction(BackwardWeight{1}));
  EXPECT_NE(Instruction(BackwardInput{1}), Instruction(Backward{1}));
}

TEST(InstructionTest, ToStringShowsChunkOnlyWhenNonZero) {
  EXPECT_EQ(ToString(Forward{3, 0}), "Forward(mb=3)");
  EXPECT_EQ(ToString(Forward{3, 1}), "Forward(mb=3, chunk=1)");
  EXPECT_EQ(ToString(SendGrad{0, 2}), "SendGrad(mb=0, chunk=2)");
}

TEST(InstructionTest, MicroBatchAndChunkAccessors) {
  EXPECT_EQ(MicroBatchOf(Backward{7, 2}), 7);
  EXPECT_EQ(ChunkOf(Backward{7, 2}), 2);
  EXPECT_EQ(MicroBatchOf(AllReduceGrads{}), std::nullopt);
  EXPECT_EQ(MicroBatchOf(OptimizerStep{}), std::nullopt);
  EXPECT_EQ(ChunkOf(OptimizerStep{}), 0);
}

TEST(InstructionTest, EqualityComparesKindMicroBatchAndChunk) {
  EXPECT_EQ(Instruction(Forward{1}), Instruction(Forward{1}));
  EXPECT_NE(Instruction(Forward{1}), Instruction(Backward{1}));
  EXPECT_NE(Instruction(Forward{1}), Instruction(Forward{2}));
  EXPECT_NE(Instruction(Forward{1, 0}), Instruction(Forward{1, 1}));
  EXPECT_EQ(Instruction(OptimizerStep{}), Instruction(OptimizerStep{}));
}

}  // namespace
}  // namespace gpipe::schedule

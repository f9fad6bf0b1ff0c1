// INTERLEAVED_1F1B lists written out by hand from Megatron-LM's interleaved order (K = 2
// stages, v = 2 chunks, M = 4): forward k works on chunk (k / K) % v, micro-batch
// (k / (K*v)) * K + k % K; backward k on chunk v-1-(k / K) % v; stage s warms up with
// 2*(K-s-1) + (v-1)*K forwards. Chunk 0 of stage 0 is virtual stage 0 (loads inputs); chunk 1
// of stage 1 is virtual stage 3, the last (loads targets, computes the loss).
#include "runtime/schedule/interleaved_builder.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/schedule/schedule_test_util.h"

namespace gpipe::schedule {
namespace {

using ::gpipe::schedule::testing::BuildOk;
using ::gpipe::schedule::testing::Strings;
using Lines = std::vector<std::string>;

// Stage 0: warm-up F0a F1a F0b F1b (4 = 2*1 + 1*2); pairs (F2a, B0b) (F3a, B1b) (F2b, B0a)
// (F3b, B1a); cool-down B2b B3b B2a B3a (a = chunk 0, b = chunk 1).
TEST(InterleavedBuilderTest, TwoStagesTwoChunksFourMicroBatchesStageZero) {
  const Program program = BuildOk(pb::INTERLEAVED_1F1B, 2, 4, 2);
  EXPECT_EQ(program.kind, pb::INTERLEAVED_1F1B);
  EXPECT_EQ(program.chunks, 2);
  ASSERT_EQ(program.stage_programs.size(), 2u);
  // clang-format off: one line per block, in the order the comment above names them.
  EXPECT_EQ(Strings(program.stage_programs[0]), (Lines{"LoadMicroBatch(mb=0)",
                                                       "Forward(mb=0)",
                                                       "SendActivation(mb=0)",
                                                       "LoadMicroBatch(mb=1)",
                                                       "Forward(mb=1)",
                                                       "SendActivation(mb=1)",
                                                       "RecvActivation(mb=0, chunk=1)",
                                                       "Forward(mb=0, chunk=1)",
                                                       "SendActivation(mb=0, chunk=1)",
                                                       "RecvActivation(mb=1, chunk=1)",
                                                       "Forward(mb=1, chunk=1)",
                                                       "SendActivation(mb=1, chunk=1)",
                                                       "LoadMicroBatch(mb=2)",
                                                       "Forward(mb=2)",
                                                       "SendActivation(mb=2)",
                                                       "RecvGrad(mb=0, chunk=1)",
                                                       "Backward(mb=0, chunk=1)",
                                                       "SendGrad(mb=0, chunk=1)",
                                                       "LoadMicroBatch(mb=3)",
                                                       "Forward(mb=3)",
                                                       "SendActivation(mb=3)",
                                                       "RecvGrad(mb=1, chunk=1)",
                                                       "Backward(mb=1, chunk=1)",
                                                       "SendGrad(mb=1, chunk=1)",
                                                       "RecvActivation(mb=2, chunk=1)",
                                                       "Forward(mb=2, chunk=1)",
                                                       "SendActivation(mb=2, chunk=1)",
                                                       "RecvGrad(mb=0)",
                                                       "Backward(mb=0)",
                                                       "RecvActivation(mb=3, chunk=1)",
                                                       "Forward(mb=3, chunk=1)",
                                                       "SendActivation(mb=3, chunk=1)",
                                                       "RecvGrad(mb=1)",
                                                       "Backward(mb=1)",
                                                       "RecvGrad(mb=2, chunk=1)",
                                                       "Backward(mb=2, chunk=1)",
                                                       "SendGrad(mb=2, chunk=1)",
                                                       "RecvGrad(mb=3, chunk=1)",
                                                       "Backward(mb=3, chunk=1)",
                                                       "SendGrad(mb=3, chunk=1)",
                                                       "RecvGrad(mb=2)",
                                                       "Backward(mb=2)",
                                                       "RecvGrad(mb=3)",
                                                       "Backward(mb=3)",
                                                       "AllReduceGrads",
                                                       "OptimizerStep"}));
  // clang-format on
}

// Stage 1: warm-up F0a F1a (2 = 0 + 1*2); pairs (F0b, B0b) (F1b, B1b) (F2a, B0a) (F3a, B1a)
// (F2b, B2b) (F3b, B3b); cool-down B2a B3a.
TEST(InterleavedBuilderTest, TwoStagesTwoChunksFourMicroBatchesStageOne) {
  const Program program = BuildOk(pb::INTERLEAVED_1F1B, 2, 4, 2);
  ASSERT_EQ(program.stage_programs.size(), 2u);
  // clang-format off: one line per block, in the order the comment above names them.
  EXPECT_EQ(Strings(program.stage_programs[1]), (Lines{"RecvActivation(mb=0)",
                                                       "Forward(mb=0)",
                                                       "SendActivation(mb=0)",
                                                       "RecvActivation(mb=1)",
                                                       "Forward(mb=1)",
                                                       "SendActivation(mb=1)",
                                                       "RecvActivation(mb=0, chunk=1)",
                                                       "LoadMicroBatch(mb=0, chunk=1)",
                                                       "Forward(mb=0, chunk=1)",
                                                       "Backward(mb=0, chunk=1)",
                                                       "SendGrad(mb=0, chunk=1)",
                                                       "RecvActivation(mb=1, chunk=1)",
                                                       "LoadMicroBatch(mb=1, chunk=1)",
                                                       "Forward(mb=1, chunk=1)",
                                                       "Backward(mb=1, chunk=1)",
                                                       "SendGrad(mb=1, chunk=1)",
                                                       "RecvActivation(mb=2)",
                                                       "Forward(mb=2)",
                                                       "SendActivation(mb=2)",
                                                       "RecvGrad(mb=0)",
                                                       "Backward(mb=0)",
                                                       "SendGrad(mb=0)",
                                                       "RecvActivation(mb=3)",
                                                       "Forward(mb=3)",
                                                       "SendActivation(mb=3)",
                                                       "RecvGrad(mb=1)",
                                                       "Backward(mb=1)",
                                                       "SendGrad(mb=1)",
                                                       "RecvActivation(mb=2, chunk=1)",
                                                       "LoadMicroBatch(mb=2, chunk=1)",
                                                       "Forward(mb=2, chunk=1)",
                                                       "Backward(mb=2, chunk=1)",
                                                       "SendGrad(mb=2, chunk=1)",
                                                       "RecvActivation(mb=3, chunk=1)",
                                                       "LoadMicroBatch(mb=3, chunk=1)",
                                                       "Forward(mb=3, chunk=1)",
                                                       "Backward(mb=3, chunk=1)",
                                                       "SendGrad(mb=3, chunk=1)",
                                                       "RecvGrad(mb=2)",
                                                       "Backward(mb=2)",
                                                       "SendGrad(mb=2)",
                                                       "RecvGrad(mb=3)",
                                                       "Backward(mb=3)",
                                                       "SendGrad(mb=3)",
                                                       "AllReduceGrads",
                                                       "OptimizerStep"}));
  // clang-format on
}

// M = K: the warm-up covers every forward on stage 0 of 3 (2*2 + 1*3 = 7 > 2*3), so it runs
// all six forwards, chunk 0 then chunk 1, before any backward.
TEST(InterleavedBuilderTest, WarmUpIsCappedByTheForwardCount) {
  const Program program = BuildOk(pb::INTERLEAVED_1F1B, 3, 3, 2);
  std::vector<std::string> computes;
  for (const Instruction& instruction : program.stage_programs[0].instructions) {
    if (std::holds_alternative<Forward>(instruction) ||
        std::holds_alternative<Backward>(instruction)) {
      computes.push_back(ToString(instruction));
    }
  }
  EXPECT_EQ(computes,
            (Lines{"Forward(mb=0)", "Forward(mb=1)", "Forward(mb=2)", "Forward(mb=0, chunk=1)",
                   "Forward(mb=1, chunk=1)", "Forward(mb=2, chunk=1)", "Backward(mb=0, chunk=1)",
                   "Backward(mb=1, chunk=1)", "Backward(mb=2, chunk=1)", "Backward(mb=0)",
                   "Backward(mb=1)", "Backward(mb=2)"}));
}

TEST(InterleavedBuilderTest, APartialLastGroupPostsReceivesInSendOrder) {
  // K = 2, M = 3: groups {0, 1} and {2}. Stage 1 sends micro-batch 1's chunk-1 gradient before
  // micro-batch 2's chunk-0 activation, so stage 0 posts that gradient's receive first, though
  // it consumes the activation first.
  const Program program = BuildOk(pb::INTERLEAVED_1F1B, 2, 3, 2);
  const std::vector<Instruction>& stage0 = program.stage_programs[0].instructions;
  const auto at = [&](const Instruction& instruction) {
    return std::find(stage0.begin(), stage0.end(), instruction) - stage0.begin();
  };
  EXPECT_LT(at(RecvGrad{1, 1}), at(RecvActivation{2, 1}));
  EXPECT_LT(at(RecvActivation{2, 1}), at(Forward{2, 1}));
}

}  // namespace
}  // namespace gpipe::schedule

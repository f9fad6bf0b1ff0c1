// Skip connections across virtual stages: AddSkipTransfers places their transfers into every
// built-in schedule so the result verifies (MPI's and NCCL's matching), and the verifier refuses
// programs whose skip transfers are broken in one place, naming the instruction and the rule.
#include "runtime/schedule/skip_transfers.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/schedule/build_program.h"
#include "runtime/schedule/verifier.h"

namespace gpipe::schedule {
namespace {

using ::testing::HasSubstr;

// Join layer 10 on virtual stage 3 reads layer 1 (virtual stage 0); layer 6 on virtual stage 2
// reads layer 1 too; layer 8 on virtual stage 3 reads layer 5 (virtual stage 2).
std::vector<SkipRoute> Routes() {
  return {{.layer = 6, .producer = 1, .from = 0, .to = 2},
          {.layer = 8, .producer = 5, .from = 2, .to = 3},
          {.layer = 10, .producer = 1, .from = 0, .to = 3}};
}

Program WithSkips(pb::Schedule kind, int stages, int micro_batches, int chunks = 1) {
  absl::StatusOr<Program> program = BuildProgram(kind, stages, micro_batches, chunks);
  EXPECT_TRUE(program.ok()) << program.status();
  EXPECT_TRUE(AddSkipTransfers(Routes(), *program).ok());
  return *program;
}

std::string VerifyError(const Program& program) {
  const absl::StatusOr<VerifyResult> result = VerifyProgram(program, OpCosts{});
  EXPECT_FALSE(result.ok()) << "the verifier accepted a broken program";
  return result.ok() ? "" : std::string(result.status().message());
}

int Find(const Program& program, int stage, const Instruction& instruction) {
  const auto& list = program.stage_programs[stage].instructions;
  const auto it = std::find(list.begin(), list.end(), instruction);
  EXPECT_NE(it, list.end()) << ToString(instruction) << " not on stage " << stage;
  return static_cast<int>(it - list.begin());
}

TEST(SkipTransfersTest, EveryBuiltInScheduleVerifiesWithSkips) {
  struct Case {
    pb::Schedule kind;
    int stages;
    int chunks;
  };
  for (const Case& c : std::vector<Case>{{pb::GPIPE, 4, 1},
                                         {pb::ONE_F_ONE_B, 4, 1},
                                         {pb::ZERO_BUBBLE_H1, 4, 1},
                                         {pb::ZERO_BUBBLE_H2, 4, 1},
                                         {pb::INTERLEAVED_1F1B, 2, 2},
                                         {pb::ZERO_BUBBLE_V, 2, 2},
                                         {pb::DUALPIPE_V, 2, 2},
                                         {pb::EVAL, 4, 1}}) {
    for (int m : {1, 3, 4, 8}) {
      SCOPED_TRACE(absl::StrCat(pb::Schedule_Name(c.kind), " K=", c.stages, " M=", m));
      const Program program = WithSkips(c.kind, c.stages, m, c.chunks);
      const absl::StatusOr<VerifyResult> result = VerifyProgram(program, OpCosts{});
      ASSERT_TRUE(result.ok()) << result.status();
      int sends = 0, receives = 0;
      for (const StageProgram& stage : program.stage_programs) {
        for (const Instruction& instruction : stage.instructions) {
          sends += std::holds_alternative<SendSkip>(instruction) ||
                   std::holds_alternative<SendSkipGrad>(instruction);
          receives += std::holds_alternative<RecvSkip>(instruction) ||
                      std::holds_alternative<RecvSkipGrad>(instruction);
        }
      }
      const int per_route = c.kind == pb::EVAL ? 1 : 2;
      EXPECT_EQ(sends, 3 * m * per_route);
      EXPECT_EQ(receives, 3 * m * per_route);
    }
  }
}

TEST(SkipTransfersTest, ProgramsRoundTripThroughTheWireFormat) {
  const Program program = WithSkips(pb::ONE_F_ONE_B, 4, 2);
  for (const StageProgram& stage : program.stage_programs) {
    absl::StatusOr<StageProgram> back = FromProto(ToProto(stage));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->instructions, stage.instructions);
  }
  pb::StageProgramProto missing = ToProto(program.stage_programs[0]);
  for (pb::InstructionProto& i : *missing.mutable_instructions()) {
    if (i.kind() == pb::InstructionProto::SEND_SKIP) i.clear_skip_layer();
  }
  EXPECT_THAT(FromProto(missing).status().message(), HasSubstr("SEND_SKIP has no skip_layer"));
}

TEST(SkipTransfersTest, MissingReceiveNamesTheSendNobodyTakes) {
  Program program = WithSkips(pb::ONE_F_ONE_B, 4, 2);
  auto& list = program.stage_programs[3].instructions;
  list.erase(list.begin() + Find(program, 3, RecvSkip{1, 0, 10}));
  EXPECT_THAT(VerifyError(program),
              HasSubstr("SendSkip(mb=1, layer=10): stage 3 never receives it (no matching "
                        "RecvSkip(mb=1, layer=10))"));
}

TEST(SkipTransfersTest, MissingSendNamesTheWaitingReceive) {
  Program program = WithSkips(pb::ONE_F_ONE_B, 4, 2);
  auto& list = program.stage_programs[3].instructions;
  list.erase(list.begin() + Find(program, 3, SendSkipGrad{0, 0, 8}));
  EXPECT_THAT(VerifyError(program), HasSubstr("RecvSkipGrad(mb=0, layer=8): no matching "
                                              "SendSkipGrad(mb=0, layer=8) on stage 3"));
}

TEST(SkipTransfersTest, ReceiveAfterTheForwardThatNeedsItIsRefused) {
  Program program = WithSkips(pb::ONE_F_ONE_B, 4, 2);
  auto& list = program.stage_programs[2].instructions;
  const int recv = Find(program, 2, RecvSkip{0, 0, 6});
  const int forward = Find(program, 2, Forward{0, 0});
  std::rotate(list.begin() + recv, list.begin() + recv + 1, list.begin() + forward + 1);
  EXPECT_THAT(VerifyError(program),
              HasSubstr("RecvSkip(mb=0, layer=6): receives after Forward(mb=0) at instruction #"));
}

TEST(SkipTransfersTest, SendBeforeTheForwardThatProducesItIsRefused) {
  Program program = WithSkips(pb::GPIPE, 4, 2);
  auto& list = program.stage_programs[0].instructions;
  const int send = Find(program, 0, SendSkip{1, 0, 6});
  const int forward = Find(program, 0, Forward{1, 0});
  const Instruction moved = list[send];
  list.erase(list.begin() + send);
  list.insert(list.begin() + forward, moved);
  EXPECT_THAT(VerifyError(program),
              HasSubstr("SendSkip(mb=1, layer=6): sends before Forward(mb=1) has produced"));
}

TEST(SkipTransfersTest, AnInstructionOnTheWrongStageOrLayerIsRefused) {
  Program wrong_stage = WithSkips(pb::ONE_F_ONE_B, 4, 2);
  auto& list = wrong_stage.stage_programs[1].instructions;
  list.insert(list.begin(), RecvSkip{0, 0, 10});
  EXPECT_THAT(VerifyError(wrong_stage),
              HasSubstr("this instruction belongs on stage 3, not on virtual stage 1"));
  Program unknown = WithSkips(pb::ONE_F_ONE_B, 4, 2);
  unknown.stage_programs[0].instructions.insert(unknown.stage_programs[0].instructions.begin(),
                                                RecvSkip{0, 0, 7});
  EXPECT_THAT(VerifyError(unknown), HasSubstr("no skip connection crosses stages into layer 7"));
}

TEST(SkipTransfersTest, ATransferTwiceOrAGradientInAnEvalProgramIsRefused) {
  Program twice = WithSkips(pb::ONE_F_ONE_B, 4, 2);
  auto& list = twice.stage_programs[0].instructions;
  const int send = Find(twice, 0, SendSkip{0, 0, 10});
  list.insert(list.begin() + send + 1, SendSkip{0, 0, 10});
  EXPECT_THAT(VerifyError(twice), HasSubstr("each skip transfer happens once"));
  Program eval = WithSkips(pb::EVAL, 4, 2);
  auto& eval_list = eval.stage_programs[3].instructions;
  eval_list.insert(eval_list.begin() + Find(eval, 3, Forward{1, 0}) + 1, SendSkipGrad{1, 0, 10});
  EXPECT_THAT(VerifyError(eval), HasSubstr("forward-only programs move no gradients"));
}

TEST(SkipTransfersTest, NcclOrderMismatchBetweenTwoRanksIsRefused) {
  // Stage 2 sends layer 8's output and then micro-batch 0's activation to stage 3; swapping the
  // two receives on stage 3 is fine by key (MPI) but not in issue order (NCCL).
  Program program = WithSkips(pb::GPIPE, 4, 1);
  auto& list = program.stage_programs[3].instructions;
  const int skip = Find(program, 3, RecvSkip{0, 0, 8});
  const int activation = Find(program, 3, RecvActivation{0, 0});
  std::swap(list[skip], list[activation]);
  EXPECT_THAT(VerifyError(program),
              HasSubstr("RecvActivation(mb=0) is the receive number 0 stage 3 posts from stage 2, "
                        "but the send number 0 stage 2 issues to it is stage 2, instruction #"));
  EXPECT_THAT(VerifyError(program), HasSubstr("SendSkip(mb=0, layer=8)"));
}

TEST(SkipTransfersTest, BadRoutesAndProgramsAlreadyRoutedAreRefused) {
  absl::StatusOr<Program> program = BuildProgram(pb::ONE_F_ONE_B, 2, 2);
  ASSERT_TRUE(program.ok());
  EXPECT_THAT(
      AddSkipTransfers({{.layer = 3, .producer = 1, .from = 1, .to = 0}}, *program).message(),
      HasSubstr("it must go forward"));
  ASSERT_TRUE(AddSkipTransfers({{.layer = 3, .producer = 1, .from = 0, .to = 1}}, *program).ok());
  EXPECT_THAT(
      AddSkipTransfers({{.layer = 3, .producer = 1, .from = 0, .to = 1}}, *program).message(),
      HasSubstr("skip transfers are added once"));
}

}  // namespace
}  // namespace gpipe::schedule

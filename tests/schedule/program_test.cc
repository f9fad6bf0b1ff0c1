#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/schedule/build_program.h"
#include "tests/schedule/schedule_test_util.h"

namespace gpipe::schedule {
namespace {

using ::gpipe::schedule::testing::GpipeProgram;
using ::testing::HasSubstr;

TEST(BuildProgramTest, RejectsZeroStagesNamingTheField) {
  const absl::StatusOr<Program> program = BuildProgram(pb::GPIPE, 0, 4);
  ASSERT_FALSE(program.ok());
  EXPECT_EQ(program.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(program.status().message()),
              HasSubstr("pipeline.stages is 0; it must be at least 1"));
}

TEST(BuildProgramTest, RejectsNonPositiveMicroBatchesNamingTheField) {
  const absl::StatusOr<Program> program = BuildProgram(pb::GPIPE, 2, -3);
  ASSERT_FALSE(program.ok());
  EXPECT_EQ(program.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(program.status().message()),
              HasSubstr("pipeline.micro_batches is -3; it must be at least 1"));
}

TEST(BuildProgramTest, RejectsUnknownScheduleKind) {
  const absl::StatusOr<Program> program = BuildProgram(static_cast<pb::Schedule>(42), 2, 2);
  ASSERT_FALSE(program.ok());
  EXPECT_EQ(program.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(program.status().message()),
              HasSubstr("pipeline.schedule 42 is not supported; supported schedules: GPIPE, "
                        "ONE_F_ONE_B, INTERLEAVED_1F1B, ZERO_BUBBLE_H1, ZERO_BUBBLE_H2, "
                        "ZERO_BUBBLE_V, DUALPIPE_V, EVAL"));
}

TEST(BuildProgramTest, RejectsProgramsTooLargeToHold) {
  const absl::StatusOr<Program> program = BuildProgram(pb::GPIPE, 1024, 1025);
  ASSERT_FALSE(program.ok());
  EXPECT_THAT(std::string(program.status().message()),
              HasSubstr("pipeline.stages * pipeline.micro_batches is 1024 * 1025 = 1049600"));
  EXPECT_TRUE(BuildProgram(pb::GPIPE, 1024, 1024).ok());
}

TEST(ProgramProtoTest, RoundTripKeepsEveryInstruction) {
  const Program program = GpipeProgram(3, 4);
  for (const StageProgram& stage : program.stage_programs) {
    const pb::StageProgramProto proto = ToProto(stage);
    EXPECT_EQ(proto.stage(), stage.stage);
    ASSERT_EQ(proto.instructions_size(), static_cast<int>(stage.instructions.size()));
    // Through the wire format too, as rank 0 sends it.
    pb::StageProgramProto parsed;
    ASSERT_TRUE(parsed.ParseFromString(proto.SerializeAsString()));
    const absl::StatusOr<StageProgram> back = FromProto(parsed);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->stage, stage.stage);
    EXPECT_EQ(back->instructions, stage.instructions);
  }
}

TEST(ProgramProtoTest, RoundTripKeepsChunks) {
  StageProgram stage;
  stage.stage = 1;
  stage.instructions = {RecvActivation{2, 1}, Forward{2, 1},    SendActivation{2, 1},
                        RecvGrad{2, 1},       Backward{2, 1},   SendGrad{2, 1},
                        LoadMicroBatch{0, 3}, AllReduceGrads{}, OptimizerStep{}};
  const pb::StageProgramProto proto = ToProto(stage);
  EXPECT_EQ(proto.instructions(0).kind(), pb::InstructionProto::RECV_ACTIVATION);
  EXPECT_EQ(proto.instructions(0).micro_batch(), 2);
  EXPECT_EQ(proto.instructions(0).chunk(), 1);
  EXPECT_FALSE(proto.instructions(7).has_micro_batch());
  const absl::StatusOr<StageProgram> back = FromProto(proto);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->instructions, stage.instructions);
}

TEST(ProgramProtoTest, RoundTripKeepsZeroBubbleAndEvalInstructions) {
  StageProgram stage;
  stage.stage = 3;
  stage.instructions = {RecvGrad{4, 2},   BackwardInput{4, 2}, SendGrad{4, 2}, BackwardWeight{4, 2},
                        BackwardInput{0}, BackwardWeight{0},   ReportEval{}};
  const pb::StageProgramProto proto = ToProto(stage);
  ASSERT_EQ(proto.instructions_size(), 7);
  EXPECT_EQ(proto.instructions(1).kind(), pb::InstructionProto::BACKWARD_INPUT);
  EXPECT_EQ(proto.instructions(3).kind(), pb::InstructionProto::BACKWARD_WEIGHT);
  EXPECT_EQ(proto.instructions(3).micro_batch(), 4);
  EXPECT_EQ(proto.instructions(3).chunk(), 2);
  EXPECT_EQ(proto.instructions(6).kind(), pb::InstructionProto::REPORT_EVAL);
  EXPECT_FALSE(proto.instructions(6).has_micro_batch());
  pb::StageProgramProto parsed;
  ASSERT_TRUE(parsed.ParseFromString(proto.SerializeAsString()));
  const absl::StatusOr<StageProgram> back = FromProto(parsed);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->stage, 3);
  EXPECT_EQ(back->instructions, stage.instructions);
}

TEST(ProgramProtoTest, RoundTripKeepsEveryBuiltProgram) {
  for (pb::Schedule kind : AllSchedules()) {
    const int chunks =
        kind == pb::INTERLEAVED_1F1B || kind == pb::ZERO_BUBBLE_V || kind == pb::DUALPIPE_V ? 2 : 1;
    const absl::StatusOr<Program> program = BuildProgram(kind, 3, 6, chunks);
    ASSERT_TRUE(program.ok()) << program.status();
    for (const StageProgram& stage : program->stage_programs) {
      const absl::StatusOr<StageProgram> back = FromProto(ToProto(stage));
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_EQ(back->instructions, stage.instructions) << pb::Schedule_Name(kind);
    }
  }
}

TEST(ProgramProtoTest, FromProtoRejectsMicroBatchOnReportEval) {
  pb::StageProgramProto proto;
  proto.set_stage(0);
  pb::InstructionProto* instruction = proto.add_instructions();
  instruction->set_kind(pb::InstructionProto::REPORT_EVAL);
  instruction->set_micro_batch(1);
  EXPECT_THAT(std::string(FromProto(proto).status().message()),
              HasSubstr("instruction #0: REPORT_EVAL is step-level and takes no micro_batch or "
                        "chunk"));
}

TEST(ProgramProtoTest, FromProtoRejectsMissingKind) {
  pb::StageProgramProto proto;
  proto.set_stage(0);
  proto.add_instructions()->set_kind(pb::InstructionProto::FORWARD);
  proto.mutable_instructions(0)->set_micro_batch(0);
  proto.add_instructions()->set_micro_batch(1);  // no kind
  const absl::StatusOr<StageProgram> program = FromProto(proto);
  ASSERT_FALSE(program.ok());
  EXPECT_EQ(program.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(program.status().message()),
              HasSubstr("stage 0, instruction #1: has no kind"));
}

TEST(ProgramProtoTest, FromProtoRejectsKindUnknownOnTheWire) {
  // Field 1 (kind) = 99, a value this build does not know: proto2 keeps it as an unknown field.
  pb::InstructionProto instruction;
  const std::string wire = std::string("\x08\x63\x10\x00", 4);
  ASSERT_TRUE(instruction.ParseFromString(wire));
  pb::StageProgramProto proto;
  proto.set_stage(2);
  *proto.add_instructions() = instruction;
  const absl::StatusOr<StageProgram> program = FromProto(proto);
  ASSERT_FALSE(program.ok());
  EXPECT_THAT(std::string(program.status().message()),
              HasSubstr("stage 2, instruction #0: has no kind (or one this build does not know)"));
}

TEST(ProgramProtoTest, FromProtoRejectsNegativeMicroBatch) {
  pb::StageProgramProto proto;
  proto.set_stage(1);
  pb::InstructionProto* instruction = proto.add_instructions();
  instruction->set_kind(pb::InstructionProto::BACKWARD);
  instruction->set_micro_batch(-1);
  const absl::StatusOr<StageProgram> program = FromProto(proto);
  ASSERT_FALSE(program.ok());
  EXPECT_EQ(program.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(program.status().message()),
              HasSubstr("stage 1, instruction #0: micro_batch is -1; it must be >= 0"));
}

TEST(ProgramProtoTest, FromProtoRejectsMissingMicroBatch) {
  pb::StageProgramProto proto;
  proto.set_stage(0);
  proto.add_instructions()->set_kind(pb::InstructionProto::SEND_GRAD);
  const absl::StatusOr<StageProgram> program = FromProto(proto);
  ASSERT_FALSE(program.ok());
  EXPECT_THAT(std::string(program.status().message()),
              HasSubstr("instruction #0: SEND_GRAD has no micro_batch"));
}

TEST(ProgramProtoTest, FromProtoRejectsNegativeChunk) {
  pb::StageProgramProto proto;
  proto.set_stage(0);
  pb::InstructionProto* instruction = proto.add_instructions();
  instruction->set_kind(pb::InstructionProto::FORWARD);
  instruction->set_micro_batch(0);
  instruction->set_chunk(-2);
  const absl::StatusOr<StageProgram> program = FromProto(proto);
  ASSERT_FALSE(program.ok());
  EXPECT_THAT(std::string(program.status().message()),
              HasSubstr("instruction #0: chunk is -2; it must be >= 0"));
}

TEST(ProgramProtoTest, FromProtoRejectsMicroBatchOnStepLevelInstruction) {
  pb::StageProgramProto proto;
  proto.set_stage(0);
  pb::InstructionProto* instruction = proto.add_instructions();
  instruction->set_kind(pb::InstructionProto::OPTIMIZER_STEP);
  instruction->set_micro_batch(0);
  const absl::StatusOr<StageProgram> program = FromProto(proto);
  ASSERT_FALSE(program.ok());
  EXPECT_THAT(std::string(program.status().message()),
              HasSubstr("OPTIMIZER_STEP is step-level and takes no micro_batch or chunk"));
}

TEST(ProgramProtoTest, FromProtoRejectsMissingOrNegativeStage) {
  pb::StageProgramProto proto;
  EXPECT_THAT(std::string(FromProto(proto).status().message()), HasSubstr("stage is missing"));
  proto.set_stage(-1);
  EXPECT_THAT(std::string(FromProto(proto).status().message()), HasSubstr("stage is -1"));
}

TEST(DescribeInstructionTest, NamesStageIndexAndInstruction) {
  const Program program = GpipeProgram(2, 2);
  EXPECT_EQ(DescribeInstruction(program, 1, 6), "stage 1, instruction #6 Backward(mb=1)");
  EXPECT_EQ(DescribeInstruction(program, 1, 99), "stage 1, instruction #99");
}

}  // namespace
}  // namespace gpipe::schedule

// Which (kind, stages, micro-batches, virtual stages) combinations BuildProgram accepts, and
// the messages for the others: they name the plan fields to change and values that work.
#include "runtime/schedule/schedule_shape.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/schedule/build_program.h"

namespace gpipe::schedule {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string ShapeError(pb::Schedule kind, int stages, int micro_batches, int virtual_stages) {
  const absl::Status status = CheckScheduleShape(kind, stages, micro_batches, virtual_stages);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  // BuildProgram reports exactly what CheckScheduleShape does.
  const absl::StatusOr<Program> program = BuildProgram(kind, stages, micro_batches, virtual_stages);
  EXPECT_EQ(program.status(), status);
  return std::string(status.message());
}

TEST(ScheduleShapeTest, InterleavedTakesAnyMicroBatchCount) {
  for (int m : {1, 3, 6, 7}) EXPECT_TRUE(CheckScheduleShape(pb::INTERLEAVED_1F1B, 4, m, 2).ok());
}

TEST(ScheduleShapeTest, InterleavedNeedsTwoStagesAndTwoChunks) {
  EXPECT_THAT(ShapeError(pb::INTERLEAVED_1F1B, 1, 4, 2),
              HasSubstr("INTERLEAVED_1F1B needs pipeline.stages >= 2 (got 1)"));
  EXPECT_THAT(ShapeError(pb::INTERLEAVED_1F1B, 2, 4, 1),
              HasSubstr("INTERLEAVED_1F1B needs pipeline.virtual_stages >= 2 (got 1)"));
}

TEST(ScheduleShapeTest, OtherTrainingKindsNeedOneVirtualStage) {
  for (pb::Schedule kind : {pb::GPIPE, pb::ONE_F_ONE_B, pb::ZERO_BUBBLE_H1, pb::ZERO_BUBBLE_H2}) {
    EXPECT_EQ(ShapeError(kind, 4, 8, 2),
              "pipeline.virtual_stages is 2 but pipeline.schedule " + pb::Schedule_Name(kind) +
                  " runs one chunk per stage: set pipeline.virtual_stages to 1, or use "
                  "pipeline.schedule INTERLEAVED_1F1B");
  }
}

TEST(ScheduleShapeTest, CountsMustBePositive) {
  EXPECT_THAT(ShapeError(pb::ONE_F_ONE_B, 0, 4, 1), HasSubstr("pipeline.stages is 0"));
  EXPECT_THAT(ShapeError(pb::ONE_F_ONE_B, 2, 0, 1), HasSubstr("pipeline.micro_batches is 0"));
  EXPECT_THAT(ShapeError(pb::INTERLEAVED_1F1B, 2, 4, 0),
              HasSubstr("pipeline.virtual_stages is 0; it must be at least 1"));
}

TEST(ScheduleShapeTest, SizeLimitCountsVirtualStages) {
  EXPECT_EQ(ShapeError(pb::INTERLEAVED_1F1B, 512, 1024, 4),
            "pipeline.stages * pipeline.virtual_stages * pipeline.micro_batches is 512 * 4 * "
            "1024 = 2097152; at most 1048576 is supported: use fewer micro-batches");
  EXPECT_TRUE(CheckScheduleShape(pb::INTERLEAVED_1F1B, 512, 1024, 2).ok());
  EXPECT_THAT(ShapeError(pb::ZERO_BUBBLE_H1, 1024, 1025, 1),
              HasSubstr("pipeline.stages * pipeline.micro_batches is 1024 * 1025 = 1049600"));
}

TEST(ScheduleShapeTest, UnknownKindListsTheSupportedOnes) {
  EXPECT_EQ(ShapeError(static_cast<pb::Schedule>(42), 2, 2, 1),
            "pipeline.schedule 42 is not supported; supported schedules: GPIPE, ONE_F_ONE_B, "
            "INTERLEAVED_1F1B, ZERO_BUBBLE_H1, ZERO_BUBBLE_H2, ZERO_BUBBLE_V, DUALPIPE_V, EVAL");
}

TEST(ScheduleShapeTest, EveryProtoScheduleHasABuilder) {
  const std::vector<pb::Schedule> all = AllSchedules();
  for (int value = pb::Schedule_MIN; value <= pb::Schedule_MAX; ++value) {
    // CUSTOM has no builder: its program is compiled from its action lists (custom_program.h).
    if (!pb::Schedule_IsValid(value) || value == pb::CUSTOM) continue;
    const auto kind = static_cast<pb::Schedule>(value);
    EXPECT_NE(std::find(all.begin(), all.end(), kind), all.end()) << pb::Schedule_Name(kind);
  }
  EXPECT_TRUE(IsForwardOnly(pb::EVAL));
  EXPECT_FALSE(IsForwardOnly(pb::ZERO_BUBBLE_H2));
}

// The kinds, in proto order, that CheckScheduleShape accepts for these numbers.
std::vector<pb::Schedule> SchedulesFitting(int stages, int micro_batches, int virtual_stages = 1) {
  std::vector<pb::Schedule> fitting;
  for (pb::Schedule kind : AllSchedules()) {
    if (CheckScheduleShape(kind, stages, micro_batches, virtual_stages).ok()) {
      fitting.push_back(kind);
    }
  }
  return fitting;
}

TEST(ScheduleShapeTest, EachKindAcceptsOnlyTheNumbersItFits) {
  EXPECT_THAT(SchedulesFitting(4, 8), ElementsAre(pb::GPIPE, pb::ONE_F_ONE_B, pb::ZERO_BUBBLE_H1,
                                                  pb::ZERO_BUBBLE_H2, pb::EVAL));
  // EVAL runs whatever chunks the training program has (it evaluates interleaved models too);
  // the V schedules run exactly two, with any micro-batch count.
  EXPECT_THAT(SchedulesFitting(4, 8, 2),
              ElementsAre(pb::INTERLEAVED_1F1B, pb::ZERO_BUBBLE_V, pb::DUALPIPE_V, pb::EVAL));
  EXPECT_THAT(SchedulesFitting(4, 6, 2),
              ElementsAre(pb::INTERLEAVED_1F1B, pb::ZERO_BUBBLE_V, pb::DUALPIPE_V, pb::EVAL));
  EXPECT_THAT(SchedulesFitting(4, 8, 3), ElementsAre(pb::INTERLEAVED_1F1B, pb::EVAL));
  EXPECT_THAT(SchedulesFitting(0, 8), ElementsAre());
}

TEST(ScheduleShapeTest, BuiltProgramsCarryTheirShape) {
  const absl::StatusOr<Program> program = BuildProgram(pb::INTERLEAVED_1F1B, 4, 8, 3);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->kind, pb::INTERLEAVED_1F1B);
  EXPECT_EQ(program->stages, 4);
  EXPECT_EQ(program->micro_batches, 8);
  EXPECT_EQ(program->chunks, 3);
  ASSERT_EQ(program->stage_programs.size(), 4u);
  for (int s = 0; s < 4; ++s) EXPECT_EQ(program->stage_programs[s].stage, s);
}

}  // namespace
}  // namespace gpipe::schedule

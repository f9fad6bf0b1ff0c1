// TimelineFromTrace on hand-written traces (tests/trace/testdata): which step is drawn, its
// window, boxes, per-stage busy time and bubble, the fallbacks for spans without args, rows per
// rank for replicas, and the errors for files that are not gpipe traces.
#include "runtime/trace/timeline_from_trace.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/core/file_io.h"
#include "tests/support/process_runner.h"

namespace gpipe::trace {
namespace {

std::string Fixture(const std::string& name) {
  absl::StatusOr<std::string> text =
      ReadWholeFile(testing::SourcePath(absl::StrCat("tests/trace/testdata/", name)));
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : std::string();
}

const TimelineBox* FindBox(const Timeline& timeline, int row, const std::string& name) {
  for (const TimelineBox& box : timeline.boxes) {
    if (box.row == row && box.name == name) return &box;
  }
  return nullptr;
}

int BoxesOnRow(const Timeline& timeline, int row) {
  int count = 0;
  for (const TimelineBox& box : timeline.boxes) count += box.row == row ? 1 : 0;
  return count;
}

bool HasNoteContaining(const Timeline& timeline, const std::string& text) {
  for (const std::string& note : timeline.notes) {
    if (absl::StrContains(note, text)) return true;
  }
  return false;
}

TEST(TimelineFromTraceTest, DrawsTheLastStepEveryRankCompleted) {
  // Rank 1 did not complete step 2, so step 1 is the default.
  absl::StatusOr<Timeline> timeline = TimelineFromTrace(Fixture("timeline_gpipe_2x2.json"));
  ASSERT_TRUE(timeline.ok()) << timeline.status();
  EXPECT_EQ(timeline->step, 1);
  EXPECT_EQ(timeline->unit, TimeUnit::kMilliseconds);
  // From rank 0's step start (1000 us) to rank 1's step end (2005 us).
  EXPECT_DOUBLE_EQ(timeline->window_begin, 1.0);
  EXPECT_DOUBLE_EQ(timeline->window_end, 2.005);
  EXPECT_EQ(timeline->plan, "tiny <mlp> & co");
  EXPECT_EQ(timeline->schedule, "GPIPE");
  EXPECT_EQ(timeline->remat, "EXCEPT_LAST");
  EXPECT_EQ(timeline->device, "CPU");
  EXPECT_EQ(timeline->stages, 2);
  EXPECT_EQ(timeline->micro_batches, 2);
  EXPECT_EQ(timeline->chunks, 1);
}

TEST(TimelineFromTraceTest, BoxesAreTheStepsComputeSpansWithoutEvalOrComm) {
  absl::StatusOr<Timeline> timeline = TimelineFromTrace(Fixture("timeline_gpipe_2x2.json"));
  ASSERT_TRUE(timeline.ok()) << timeline.status();
  ASSERT_EQ(timeline->rows.size(), 2u);
  EXPECT_EQ(timeline->rows[0].label, "stage 0");
  EXPECT_EQ(timeline->rows[1].label, "stage 1");
  EXPECT_EQ(timeline->rows[1].rank, 1);
  // Stage 0: load 0, F0, F1, B1, B0, optimizer; stage 1: F0, F1, B1, B0, optimizer. The
  // forward-only evaluation after step 1 and the comm thread's spans are not boxes.
  EXPECT_EQ(BoxesOnRow(*timeline, 0), 6);
  EXPECT_EQ(BoxesOnRow(*timeline, 1), 5);
  const TimelineBox* f1 = FindBox(*timeline, 1, "F1");
  ASSERT_NE(f1, nullptr);
  EXPECT_DOUBLE_EQ(f1->begin, 1.215);
  EXPECT_DOUBLE_EQ(f1->end, 1.315);
  EXPECT_EQ(f1->kind, BoxKind::kForward);
  EXPECT_EQ(f1->micro_batch, 1);
  EXPECT_EQ(f1->chunk, 0);
  const TimelineBox* b0 = FindBox(*timeline, 0, "B0");
  ASSERT_NE(b0, nullptr);
  EXPECT_EQ(b0->kind, BoxKind::kBackward);
  EXPECT_EQ(b0->micro_batch, 0);
  const TimelineBox* load = FindBox(*timeline, 0, "load 0");
  ASSERT_NE(load, nullptr);
  EXPECT_EQ(load->kind, BoxKind::kOther);
  const TimelineBox* optimizer = FindBox(*timeline, 1, "optimizer");
  ASSERT_NE(optimizer, nullptr);
  EXPECT_EQ(optimizer->kind, BoxKind::kOther);
  EXPECT_EQ(optimizer->micro_batch, -1);
}

TEST(TimelineFromTraceTest, BusyCountsForwardAndBackwardOnlyAndBubbleIsTheRest) {
  absl::StatusOr<Timeline> timeline = TimelineFromTrace(Fixture("timeline_gpipe_2x2.json"));
  ASSERT_TRUE(timeline.ok()) << timeline.status();
  // Stage 0: F 100 + 100 us, B 200 + 200 us (load and optimizer are not busy); stage 1: F 100 +
  // 100, B 180 + 180. Window 1005 us.
  EXPECT_NEAR(timeline->rows[0].busy, 0.600, 1e-12);
  EXPECT_NEAR(timeline->rows[1].busy, 0.560, 1e-12);
  EXPECT_NEAR(timeline->rows[0].bubble, 1.0 - 600.0 / 1005.0, 1e-12);
  EXPECT_NEAR(timeline->rows[1].bubble, 1.0 - 560.0 / 1005.0, 1e-12);
  EXPECT_NEAR(timeline->MeanBubble(), 1.0 - 580.0 / 1005.0, 1e-12);
}

TEST(TimelineFromTraceTest, SaysTheRunFailed) {
  absl::StatusOr<Timeline> timeline = TimelineFromTrace(Fixture("timeline_gpipe_2x2.json"));
  ASSERT_TRUE(timeline.ok()) << timeline.status();
  EXPECT_TRUE(HasNoteContaining(
      *timeline, "the run failed: rank 1 (stage 1): step 2, Backward(mb=0): injected failure"));
  // Clock uncertainty (3 us) is under 1% of the step: not worth a note.
  EXPECT_FALSE(HasNoteContaining(*timeline, "clocks"));
}

TEST(TimelineFromTraceTest, StepOptionPicksAnEarlierStep) {
  absl::StatusOr<Timeline> timeline =
      TimelineFromTrace(Fixture("timeline_gpipe_2x2.json"), {.step = 0});
  ASSERT_TRUE(timeline.ok()) << timeline.status();
  EXPECT_EQ(timeline->step, 0);
  EXPECT_DOUBLE_EQ(timeline->window_begin, 0.0);
  EXPECT_DOUBLE_EQ(timeline->window_end, 0.905);
  EXPECT_EQ(timeline->boxes.size(), 2u);
  EXPECT_NEAR(timeline->rows[0].bubble, 1.0 - 100.0 / 905.0, 1e-12);
}

TEST(TimelineFromTraceTest, AStepOnlySomeRanksCompletedIsDrawnWithANote) {
  absl::StatusOr<Timeline> timeline =
      TimelineFromTrace(Fixture("timeline_gpipe_2x2.json"), {.step = 2});
  ASSERT_TRUE(timeline.ok()) << timeline.status();
  EXPECT_DOUBLE_EQ(timeline->window_begin, 2.2);
  EXPECT_DOUBLE_EQ(timeline->window_end, 3.0);
  EXPECT_TRUE(HasNoteContaining(*timeline, "rank 1 did not complete step 2"));
  // Rank 1 still recorded its forward of step 2.
  EXPECT_TRUE(timeline->rows[1].has_data);
  EXPECT_NEAR(timeline->rows[1].busy, 0.1, 1e-12);
}

TEST(TimelineFromTraceTest, AMissingStepIsAnErrorNamingTheStepsThere) {
  absl::StatusOr<Timeline> timeline =
      TimelineFromTrace(Fixture("timeline_gpipe_2x2.json"), {.step = 7});
  ASSERT_FALSE(timeline.ok());
  EXPECT_EQ(timeline.status().message(), "step 7 is not in the trace; it holds steps 0-2");
}

TEST(TimelineFromTraceTest, ChunksAndSpansWithoutArgsAreReadFromNames) {
  absl::StatusOr<Timeline> timeline = TimelineFromTrace(Fixture("timeline_interleaved.json"));
  ASSERT_TRUE(timeline.ok()) << timeline.status();
  EXPECT_EQ(timeline->step, 0);  // rank 1's step span has it only in its name
  EXPECT_EQ(timeline->chunks, 2);
  EXPECT_EQ(timeline->schedule, "INTERLEAVED_1F1B");
  EXPECT_DOUBLE_EQ(timeline->window_end, 1.01);
  // Rank 1 has no process name; its stage comes from args.stage.
  ASSERT_EQ(timeline->rows.size(), 2u);
  EXPECT_EQ(timeline->rows[1].rank, 1);
  EXPECT_EQ(BoxesOnRow(*timeline, 0), 6);
  // Rank 1's spans carry no args: they belong to the step by time, so F1.1, after its step
  // span ended, is left out.
  EXPECT_EQ(BoxesOnRow(*timeline, 1), 4);
  EXPECT_EQ(FindBox(*timeline, 1, "F1.1"), nullptr);
  const TimelineBox* chunk1 = FindBox(*timeline, 1, "F0.1");
  ASSERT_NE(chunk1, nullptr);
  EXPECT_EQ(chunk1->micro_batch, 0);
  EXPECT_EQ(chunk1->chunk, 1);
  const TimelineBox* b = FindBox(*timeline, 0, "B0.1");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->chunk, 1);
  EXPECT_EQ(b->kind, BoxKind::kBackward);
  // Stage 0: 4 forwards of 100 us and 2 backwards of 150 us in a 1010 us window.
  EXPECT_NEAR(timeline->rows[0].bubble, 1.0 - 700.0 / 1010.0, 1e-12);
}

// Two stages, two data-parallel replicas each: one row per rank, ordered by stage.
constexpr char kReplicatedTrace[] = R"json({
 "otherData": {"generator": "gpipe", "format": 1, "stages": 2, "ranks": 4},
 "traceEvents": [
  {"ph":"M","name":"process_name","pid":0,"tid":0,"args":{"name":"stage 0, replica 0"}},
  {"ph":"M","name":"process_name","pid":1,"tid":0,"args":{"name":"stage 1, replica 0"}},
  {"ph":"M","name":"process_name","pid":2,"tid":0,"args":{"name":"stage 0, replica 1"}},
  {"ph":"M","name":"process_name","pid":3,"tid":0,"args":{"name":"stage 1, replica 1"}},
  {"ph":"X","pid":0,"tid":0,"ts":0,"dur":100,"name":"step 4","cat":"step","args":{"step":4}},
  {"ph":"X","pid":1,"tid":0,"ts":0,"dur":100,"name":"step 4","cat":"step","args":{"step":4}},
  {"ph":"X","pid":2,"tid":0,"ts":0,"dur":100,"name":"step 4","cat":"step","args":{"step":4}},
  {"ph":"X","pid":3,"tid":0,"ts":0,"dur":100,"name":"step 4","cat":"step","args":{"step":4}},
  {"ph":"X","pid":2,"tid":1,"ts":10,"dur":30,"name":"F0","cat":"forward","args":{"step":4}},
  {"ph":"X","pid":2,"tid":1,"ts":30,"dur":30,"name":"W0","cat":"backward_weight","args":{"step":4}}
 ]})json";

TEST(TimelineFromTraceTest, ReplicasGetOneRowPerRankAndOverlapsCountOnce) {
  absl::StatusOr<Timeline> timeline = TimelineFromTrace(kReplicatedTrace);
  ASSERT_TRUE(timeline.ok()) << timeline.status();
  ASSERT_EQ(timeline->rows.size(), 4u);
  EXPECT_EQ(timeline->rows[0].label, "stage 0, replica 0");
  EXPECT_EQ(timeline->rows[1].label, "stage 0, replica 1");
  EXPECT_EQ(timeline->rows[1].rank, 2);
  EXPECT_EQ(timeline->rows[2].label, "stage 1, replica 0");
  ASSERT_EQ(timeline->boxes.size(), 2u);
  EXPECT_EQ(timeline->boxes[1].kind, BoxKind::kBackwardWeight);
  EXPECT_EQ(timeline->boxes[1].row, 1);
  // [10, 40] and [30, 60] us overlap: busy is their union, 50 us.
  EXPECT_NEAR(timeline->rows[1].busy, 0.05, 1e-12);
  EXPECT_NEAR(timeline->rows[1].bubble, 0.5, 1e-12);
  EXPECT_NEAR(timeline->rows[0].bubble, 1.0, 1e-12);

  absl::StatusOr<Timeline> by_stage =
      TimelineFromTrace(kReplicatedTrace, {.rows = TraceTimelineOptions::Rows::kStage});
  ASSERT_TRUE(by_stage.ok()) << by_stage.status();
  EXPECT_EQ(by_stage->rows.size(), 2u);
}

void ExpectRejected(const std::string& text, const std::string& expected) {
  absl::StatusOr<Timeline> timeline = TimelineFromTrace(text);
  ASSERT_FALSE(timeline.ok()) << "accepted: " << text;
  EXPECT_EQ(timeline.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(timeline.status().message(), expected))
      << timeline.status().message();
}

constexpr char kHeader[] =
    R"json({"otherData": {"generator": "gpipe", "format": 1}, "traceEvents": [)json";

TEST(TimelineFromTraceTest, RejectsWhatIsNotAGpipeTrace) {
  ExpectRejected("pipeline { stages: 4 }", "not a gpipe trace: the file is not valid JSON (line 1, column 1)");
  ExpectRejected(R"([{"ph":"X"}])", "the top level is a JSON array, not an object");
  ExpectRejected(R"({"otherData": {"generator": "gpipe"}})", "it has no traceEvents array");
  ExpectRejected(R"({"otherData": {"generator": "perfetto"}, "traceEvents": []})",
                 "otherData.generator is not \"gpipe\"");
  ExpectRejected(R"({"traceEvents": []})", "otherData.generator is not \"gpipe\"");
  ExpectRejected(R"({"otherData": {"generator": "gpipe", "format": 2}, "traceEvents": []})",
                 "trace format 2 is newer than this gpipe-plan reads (1)");
}

TEST(TimelineFromTraceTest, RejectsMalformedSpansNamingTheEvent) {
  ExpectRejected(absl::StrCat(kHeader, "7]}"), "traceEvents[0] is a JSON number");
  ExpectRejected(absl::StrCat(kHeader, R"json({"ph":"M"},
      {"ph":"X","pid":1,"tid":1,"ts":5,"name":"F0","cat":"forward"}]})json"),
                 "traceEvents[1] (rank 1, \"F0\"): 'dur' is missing or not a non-negative number");
  ExpectRejected(absl::StrCat(kHeader, R"json({"ph":"X","pid":1,"tid":0,"ts":"5","dur":1}]})json"),
                 "traceEvents[0] (rank 1, \"\"): 'ts' is missing or not a number");
  ExpectRejected(absl::StrCat(kHeader, R"json({"ph":"X","tid":0,"ts":5,"dur":1}]})json"),
                 "traceEvents[0]: 'pid' (the rank) is missing");
}

TEST(TimelineFromTraceTest, RejectsARankWithoutAStageAndATraceWithoutSteps) {
  ExpectRejected(
      absl::StrCat(
          kHeader,
          R"json({"ph":"X","pid":3,"tid":0,"ts":0,"dur":9,"name":"step 0","cat":"step"}]})json"),
      "rank 3: cannot tell its stage");
  ExpectRejected(absl::StrCat(kHeader, R"json({"ph":"M","name":"process_name","pid":0,"tid":0,
                                  "args":{"name":"stage 0, replica 0"}}]})json"),
                 "the trace holds no completed training step");
  // Rank 1 completed step 0 only and rank 0 step 1 only.
  ExpectRejected(absl::StrCat(kHeader, R"json(
      {"ph":"X","pid":0,"tid":0,"ts":0,"dur":9,"name":"step 1","cat":"step","args":{"stage":0}},
      {"ph":"X","pid":1,"tid":0,"ts":0,"dur":9,"name":"step 0","cat":"step","args":{"stage":1}}
      ]})json"),
                 "no training step was completed by every rank; rank 0: 1; rank 1: 0. Pick one "
                 "with --step N");
}

TEST(TimelineFromTraceTest, RejectsAStageTheTraceCannotHave) {
  // A malformed stage number must not make the picture allocate a row per claimed stage.
  ExpectRejected(absl::StrCat(kHeader, R"json({"ph":"M","name":"process_name","pid":0,"tid":0,
                                  "args":{"name":"stage 999999999, replica 0"}}]})json"),
                 "rank 0 claims stage 999999999, replica 0");
  ExpectRejected(
      absl::StrCat(kHeader, R"json(
      {"ph":"X","pid":0,"tid":0,"ts":0,"dur":9,"name":"step 0","cat":"step",
       "args":{"stage":4294967296}}]})json"),
      "rank 0: args.stage 4294967296 is not a stage number");
}

}  // namespace
}  // namespace gpipe::trace

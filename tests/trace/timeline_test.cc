// The Timeline model's own arithmetic: busy time is the union of a row's compute boxes inside
// the window, and the per-row summary `gpipe-plan timeline` prints.
#include "runtime/trace/timeline.h"

#include "gtest/gtest.h"

namespace gpipe::trace {
namespace {

Timeline TwoRows() {
  Timeline timeline;
  timeline.window_begin = 10;
  timeline.window_end = 20;
  timeline.rows = {{.label = "stage 0"}, {.label = "stage 1", .stage = 1}};
  return timeline;
}

TEST(TimelineTest, BusyIsTheUnionOfComputeBoxesClippedToTheWindow) {
  Timeline timeline = TwoRows();
  timeline.boxes = {
      {.row = 0, .begin = 8, .end = 12, .kind = BoxKind::kForward},          // 2 inside
      {.row = 0, .begin = 11, .end = 13, .kind = BoxKind::kBackward},        // +1 beyond 12
      {.row = 0, .begin = 15, .end = 16, .kind = BoxKind::kBackwardWeight},  // +1
      {.row = 0, .begin = 16, .end = 19, .kind = BoxKind::kOther},           // not busy
      {.row = 0, .begin = 19, .end = 25, .kind = BoxKind::kBackwardInput},   // +1 inside
      {.row = 1, .begin = 30, .end = 40, .kind = BoxKind::kForward},         // outside
  };
  MeasureRows(timeline);
  EXPECT_DOUBLE_EQ(timeline.rows[0].busy, 5);
  EXPECT_DOUBLE_EQ(timeline.rows[0].bubble, 0.5);
  EXPECT_DOUBLE_EQ(timeline.rows[1].busy, 0);
  EXPECT_DOUBLE_EQ(timeline.rows[1].bubble, 1.0);
  EXPECT_DOUBLE_EQ(timeline.MeanBubble(), 0.75);
}

TEST(TimelineTest, RowsWithoutDataAreLeftOutOfTheMean) {
  Timeline timeline = TwoRows();
  timeline.boxes = {{.row = 0, .begin = 10, .end = 18, .kind = BoxKind::kForward}};
  timeline.rows[1].has_data = false;
  MeasureRows(timeline);
  EXPECT_DOUBLE_EQ(timeline.MeanBubble(), 0.2);
  EXPECT_EQ(FormatRowSummary(timeline),
            "stage 0: busy 8.000 ms of 10.000 ms, bubble 20.0%\n"
            "stage 1: no data\n");
}

TEST(TimelineTest, SummaryNamesSimulatedTimeUnits) {
  Timeline timeline = TwoRows();
  timeline.unit = TimeUnit::kSimulated;
  MeasureRows(timeline);
  EXPECT_EQ(FormatRowSummary(timeline),
            "stage 0: busy 0.000 time units of 10.000 time units, bubble 100.0%\n"
            "stage 1: busy 0.000 time units of 10.000 time units, bubble 100.0%\n");
}

}  // namespace
}  // namespace gpipe::trace

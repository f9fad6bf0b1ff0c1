// The trace a run leaves: recorder bookkeeping, and the merged Chrome/Perfetto JSON (valid JSON,
// times moved onto rank 0's clock, one process per rank and one thread per track, a flow arrow
// for every send that has its receive, the run's facts and missing ranks in otherData).
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/ckpt/json_parser.h"
#include "runtime/trace/chrome_trace.h"
#include "runtime/trace/trace_recorder.h"

namespace gpipe {
namespace {

TraceEvent Event(TraceKind kind, int64_t begin, int64_t end, int mb = -1, int peer = -1,
                 int64_t step = 0) {
  TraceEvent e;
  e.kind = kind;
  e.begin_ns = begin;
  e.end_ns = end;
  e.step = step;
  e.micro_batch = mb;
  e.chunk = mb >= 0 ? 0 : -1;
  e.peer = peer;
  return e;
}

TEST(TraceRecorderTest, RecordsOnlyTheFirstStepsAndTheirEvaluations) {
  TraceRecorder all;
  EXPECT_TRUE(all.Records(1000, false));
  TraceRecorder first_two(TraceRecorderOptions{.steps = 2});
  EXPECT_TRUE(first_two.Records(0, false));
  EXPECT_TRUE(first_two.Records(1, false));
  EXPECT_FALSE(first_two.Records(2, false));
  EXPECT_TRUE(first_two.Records(2, true));  // the evaluation after step 1
  EXPECT_FALSE(first_two.Records(3, true));
}

TEST(TraceRecorderTest, SpansMeasureTheirScopeAndBoundedBuffersCountDrops) {
  TraceRecorder recorder(TraceRecorderOptions{.max_events = 2});
  for (int i = 0; i < 3; ++i) {
    const TraceSpan span(&recorder, Event(TraceKind::kForward, 0, 0, i));
  }
  ASSERT_EQ(recorder.events().size(), 2u);
  EXPECT_EQ(recorder.dropped(), 1);
  EXPECT_GE(recorder.events()[0].end_ns, recorder.events()[0].begin_ns);
  EXPECT_LE(recorder.events()[0].end_ns, recorder.events()[1].begin_ns);
  const TraceSpan nothing(nullptr, Event(TraceKind::kForward, 0, 0));  // no recorder: no-op

  const pb::RankTrace proto = recorder.ToProto(3, 2, 0);
  EXPECT_EQ(proto.rank(), 3);
  EXPECT_EQ(proto.stage(), 2);
  EXPECT_EQ(proto.dropped(), 1);
  const std::vector<TraceEvent> back = EventsFromProto(proto);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].micro_batch, 1);
  EXPECT_EQ(back[1].kind, TraceKind::kForward);
  EXPECT_EQ(back[1].begin_ns, recorder.events()[1].begin_ns);
}

// Two stages, one micro-batch: stage 0 forwards and sends, stage 1 receives, computes the loss
// and backward, sends the gradient back. Rank 1's clock runs 1 ms behind rank 0's.
std::vector<pb::RankTrace> TwoStageRun() {
  TraceRecorder r0, r1;
  r0.Add(Event(TraceKind::kStep, 0, 100'000));
  r0.Add(Event(TraceKind::kForward, 1'000, 11'000, 0));
  r0.Add(Event(TraceKind::kSendActivation, 11'000, 12'000, 0, 1));
  r0.Add(Event(TraceKind::kTransferActivationOut, 11'500, 20'000, 0, 1));
  r0.Add(Event(TraceKind::kRecvGrad, 12'000, 60'000, 0, 1));
  r0.Add(Event(TraceKind::kBackward, 60'000, 80'000, 0));
  // Rank 1's times are 1 ms (1'000'000 ns) earlier on its own clock.
  const int64_t shift = -1'000'000;
  r1.Add(Event(TraceKind::kStep, shift + 0, shift + 100'000));
  r1.Add(Event(TraceKind::kRecvActivation, shift + 500, shift + 20'000, 0, 0));
  r1.Add(Event(TraceKind::kForward, shift + 20'000, shift + 30'000, 0));
  r1.Add(Event(TraceKind::kBackward, shift + 30'000, shift + 50'000, 0));
  r1.Add(Event(TraceKind::kSendGrad, shift + 50'000, shift + 51'000, 0, 0));
  pb::RankTrace t0 = r0.ToProto(0, 0, 0);
  pb::RankTrace t1 = r1.ToProto(1, 1, 0);
  t1.set_clock_offset_ns(1'000'000);
  t1.set_clock_uncertainty_ns(2'000);
  return {t1, t0};  // any order
}

TraceRunInfo TwoStageInfo() {
  TraceRunInfo info;
  info.plan = "two \"stages\"";
  info.schedule = "GPIPE";
  info.remat = "NEVER";
  info.device = "CPU";
  info.stages = 2;
  info.micro_batches = 1;
  info.ranks = 2;
  return info;
}

std::vector<const JsonValue*> EventsWith(const JsonValue& trace, const std::string& ph) {
  std::vector<const JsonValue*> out;
  for (const JsonValue& e : trace.Find("traceEvents")->items()) {
    if (e.Find("ph")->string_value() == ph) out.push_back(&e);
  }
  return out;
}

TEST(ChromeTraceTest, MergesRanksOnRankZerosClockWithTracksAndFlows) {
  const std::string text = FormatChromeTrace(TwoStageInfo(), TwoStageRun());
  auto parsed = ParseJson(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
  const JsonValue& other = *parsed->Find("otherData");
  EXPECT_EQ(other.Find("plan")->string_value(), "two \"stages\"");
  EXPECT_EQ(other.Find("stages")->AsInt64(), 2);
  EXPECT_EQ(other.Find("status")->string_value(), "ok");
  EXPECT_EQ(other.Find("clock_offset_us")->items()[1].number_value(), 1000.0);
  EXPECT_EQ(other.Find("clock_uncertainty_us")->items()[1].number_value(), 2.0);
  EXPECT_TRUE(other.Find("missing_ranks")->items().empty());

  // Names: "stage s, replica 0" per rank, four tracks each.
  std::map<std::pair<int64_t, std::string>, std::string> names;
  for (const JsonValue* m : EventsWith(*parsed, "M")) {
    if (m->Find("name")->string_value() == "process_name") {
      names[{*m->Find("pid")->AsInt64(), "process"}] =
          m->Find("args")->Find("name")->string_value();
    }
    if (m->Find("name")->string_value() == "thread_name") {
      names[{*m->Find("pid")->AsInt64(), absl::StrCat("tid", *m->Find("tid")->AsInt64())}] =
          m->Find("args")->Find("name")->string_value();
    }
  }
  EXPECT_EQ((names[{1, "process"}]), "stage 1, replica 0");
  EXPECT_EQ((names[{0, "tid1"}]), "compute");
  EXPECT_EQ((names[{1, "tid2"}]), "comm");
  EXPECT_EQ((names[{1, "tid3"}]), "transfers");

  // Rank 1's forward, shifted onto rank 0's clock: 20..30 us after the start.
  bool found = false;
  for (const JsonValue* x : EventsWith(*parsed, "X")) {
    if (x->Find("pid")->AsInt64() == 1 && x->Find("name")->string_value() == "F0") {
      found = true;
      EXPECT_EQ(x->Find("cat")->string_value(), "forward");
      EXPECT_DOUBLE_EQ(x->Find("ts")->number_value(), 20.0);
      EXPECT_DOUBLE_EQ(x->Find("dur")->number_value(), 10.0);
      EXPECT_EQ(x->Find("tid")->AsInt64(), 1);
      EXPECT_EQ(x->Find("args")->Find("micro_batch")->AsInt64(), 0);
      EXPECT_EQ(x->Find("args")->Find("stage")->AsInt64(), 1);
    }
  }
  EXPECT_TRUE(found);

  // Two flows (activation 0 -> 1, gradient 1 -> 0), each from a send to its receive.
  const auto starts = EventsWith(*parsed, "s");
  const auto finishes = EventsWith(*parsed, "f");
  ASSERT_EQ(starts.size(), 2u);
  ASSERT_EQ(finishes.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(starts[i]->Find("id")->AsInt64(), finishes[i]->Find("id")->AsInt64());
    EXPECT_NE(starts[i]->Find("pid")->AsInt64(), finishes[i]->Find("pid")->AsInt64());
    EXPECT_LE(starts[i]->Find("ts")->number_value(), finishes[i]->Find("ts")->number_value());
  }
  // The transfer in flight is an async pair; the step start is a global instant.
  EXPECT_EQ(EventsWith(*parsed, "b").size(), 1u);
  EXPECT_EQ(EventsWith(*parsed, "e").size(), 1u);
  ASSERT_EQ(EventsWith(*parsed, "i").size(), 1u);
  EXPECT_EQ(EventsWith(*parsed, "i")[0]->Find("name")->string_value(), "step 0");
}

TEST(ChromeTraceTest, AFailedRunListsItsErrorAndTheRanksThatNeverReported) {
  std::vector<pb::RankTrace> ranks = TwoStageRun();
  ranks.erase(ranks.begin());  // rank 1 never reported
  ranks[0].set_error("rank 0, stage 0, step 0: out of memory");
  TraceRunInfo info = TwoStageInfo();
  info.ranks = 3;
  info.status = "rank 0, stage 0, step 0: out of memory";
  auto parsed = ParseJson(FormatChromeTrace(info, ranks));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const JsonValue& other = *parsed->Find("otherData");
  EXPECT_EQ(other.Find("status")->string_value(), info.status);
  ASSERT_EQ(other.Find("missing_ranks")->items().size(), 2u);
  EXPECT_EQ(other.Find("missing_ranks")->items()[0].AsInt64(), 1);
  EXPECT_EQ(other.Find("missing_ranks")->items()[1].AsInt64(), 2);
  // Per-rank lists stay indexed by rank: null where a rank never reported.
  ASSERT_EQ(other.Find("clock_offset_us")->items().size(), 3u);
  EXPECT_TRUE(other.Find("clock_offset_us")->items()[0].is_number());
  EXPECT_TRUE(other.Find("clock_offset_us")->items()[1].is_null());
  EXPECT_TRUE(other.Find("dropped_events")->items()[2].is_null());
  ASSERT_EQ(other.Find("rank_errors")->items().size(), 1u);
  EXPECT_TRUE(EventsWith(*parsed, "s").empty());  // no receive, no arrow
}

TEST(ChromeTraceTest, InterleavedTransfersWrapToTheNextChunk) {
  // Two stages, two chunks: stage 1's chunk 0 sends to stage 0's chunk 1.
  TraceRecorder r0, r1;
  TraceEvent send = Event(TraceKind::kSendActivation, 0, 1'000, 0, 0);
  r1.Add(send);
  TraceEvent recv = Event(TraceKind::kRecvActivation, 0, 2'000, 0, 1);
  recv.chunk = 1;
  r0.Add(recv);
  TraceRunInfo info = TwoStageInfo();
  info.chunks = 2;
  auto parsed = ParseJson(FormatChromeTrace(info, {r0.ToProto(0, 0, 0), r1.ToProto(1, 1, 0)}));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(EventsWith(*parsed, "s").size(), 1u);
}

}  // namespace
}  // namespace gpipe

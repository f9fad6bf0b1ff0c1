// The trace a run leaves: recorder bookkeeping, and the merged Chrome/Perfetto JSON (valid JSON,
// times moved onto rank 0's clock, one process per rank and one thread per track, a flow arrow
// for every send that has its receive, the run's facts and missing ranks in otherData).
#include "runtime/trace/chrome_trace.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/core/json.h"
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

std::vector<const Json*> EventsWith(const Json& trace, const std::string& ph) {
  std::vector<const Json*> out;
  for (const Json& e : trace.at("traceEvents")) {
    if (e.at("ph").get<std::string>() == ph) out.push_back(&e);
  }
  return out;
}

TEST(ChromeTraceTest, MergesRanksOnRankZerosClockWithTracksAndFlows) {
  const std::string text = FormatChromeTrace(TwoStageInfo(), TwoStageRun());
  auto parsed = ParseJson(text, "the trace");
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
  const Json& other = parsed->at("otherData");
  EXPECT_EQ(other.at("plan").get<std::string>(), "two \"stages\"");
  EXPECT_EQ(other.at("stages").get<int64_t>(), 2);
  EXPECT_EQ(other.at("status").get<std::string>(), "ok");
  EXPECT_EQ(other.at("clock_offset_us")[1].get<double>(), 1000.0);
  EXPECT_EQ(other.at("clock_uncertainty_us")[1].get<double>(), 2.0);
  EXPECT_TRUE(other.at("missing_ranks").empty());

  // Names: "stage s, replica 0" per rank, four tracks each.
  std::map<std::pair<int64_t, std::string>, std::string> names;
  for (const Json* m : EventsWith(*parsed, "M")) {
    if (m->at("name").get<std::string>() == "process_name") {
      names[{m->at("pid").get<int64_t>(), "process"}] = m->at("args").at("name").get<std::string>();
    }
    if (m->at("name").get<std::string>() == "thread_name") {
      names[{m->at("pid").get<int64_t>(), absl::StrCat("tid", m->at("tid").get<int64_t>())}] =
          m->at("args").at("name").get<std::string>();
    }
  }
  EXPECT_EQ((names[{1, "process"}]), "stage 1, replica 0");
  EXPECT_EQ((names[{0, "tid1"}]), "compute");
  EXPECT_EQ((names[{1, "tid2"}]), "comm");
  EXPECT_EQ((names[{1, "tid3"}]), "transfers");

  // Rank 1's forward, shifted onto rank 0's clock: 20..30 us after the start.
  bool found = false;
  for (const Json* x : EventsWith(*parsed, "X")) {
    if (x->at("pid").get<int64_t>() == 1 && x->at("name").get<std::string>() == "F0") {
      found = true;
      EXPECT_EQ(x->at("cat").get<std::string>(), "forward");
      EXPECT_DOUBLE_EQ(x->at("ts").get<double>(), 20.0);
      EXPECT_DOUBLE_EQ(x->at("dur").get<double>(), 10.0);
      EXPECT_EQ(x->at("tid").get<int64_t>(), 1);
      EXPECT_EQ(x->at("args").at("micro_batch").get<int64_t>(), 0);
      EXPECT_EQ(x->at("args").at("stage").get<int64_t>(), 1);
    }
  }
  EXPECT_TRUE(found);

  // Two flows (activation 0 -> 1, gradient 1 -> 0), each from a send to its receive.
  const auto starts = EventsWith(*parsed, "s");
  const auto finishes = EventsWith(*parsed, "f");
  ASSERT_EQ(starts.size(), 2u);
  ASSERT_EQ(finishes.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(starts[i]->at("id").get<int64_t>(), finishes[i]->at("id").get<int64_t>());
    EXPECT_NE(starts[i]->at("pid").get<int64_t>(), finishes[i]->at("pid").get<int64_t>());
    EXPECT_LE(starts[i]->at("ts").get<double>(), finishes[i]->at("ts").get<double>());
  }
  // The transfer in flight is an async pair; the step start is a global instant.
  EXPECT_EQ(EventsWith(*parsed, "b").size(), 1u);
  EXPECT_EQ(EventsWith(*parsed, "e").size(), 1u);
  ASSERT_EQ(EventsWith(*parsed, "i").size(), 1u);
  EXPECT_EQ(EventsWith(*parsed, "i")[0]->at("name").get<std::string>(), "step 0");
}

TEST(ChromeTraceTest, AFailedRunListsItsErrorAndTheRanksThatNeverReported) {
  std::vector<pb::RankTrace> ranks = TwoStageRun();
  ranks.erase(ranks.begin());  // rank 1 never reported
  ranks[0].set_error("rank 0, stage 0, step 0: out of memory");
  TraceRunInfo info = TwoStageInfo();
  info.ranks = 3;
  info.status = "rank 0, stage 0, step 0: out of memory";
  auto parsed = ParseJson(FormatChromeTrace(info, ranks), "the trace");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const Json& other = parsed->at("otherData");
  EXPECT_EQ(other.at("status").get<std::string>(), info.status);
  ASSERT_EQ(other.at("missing_ranks").size(), 2u);
  EXPECT_EQ(other.at("missing_ranks")[0].get<int64_t>(), 1);
  EXPECT_EQ(other.at("missing_ranks")[1].get<int64_t>(), 2);
  // Per-rank lists stay indexed by rank: null where a rank never reported.
  ASSERT_EQ(other.at("clock_offset_us").size(), 3u);
  EXPECT_TRUE(other.at("clock_offset_us")[0].is_number());
  EXPECT_TRUE(other.at("clock_offset_us")[1].is_null());
  EXPECT_TRUE(other.at("dropped_events")[2].is_null());
  ASSERT_EQ(other.at("rank_errors").size(), 1u);
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
  auto parsed =
      ParseJson(FormatChromeTrace(info, {r0.ToProto(0, 0, 0), r1.ToProto(1, 1, 0)}), "the trace");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(EventsWith(*parsed, "s").size(), 1u);
}

}  // namespace
}  // namespace gpipe

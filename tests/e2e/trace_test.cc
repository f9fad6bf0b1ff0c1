// runtime.trace on real jobs: the merged trace has every rank, every instruction of every
// recorded step, an arrow for every transfer, and clocks aligned well enough that causality
// holds across ranks (stage s+1 forwards micro-batch m only after stage s finished it). A job
// that fails still leaves a trace naming the error.
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/core/file_io.h"
#include "runtime/core/json.h"
#include "runtime/core/json_fields.h"
#include "tests/support/process_runner.h"
#include "tests/support/scratch_dir.h"

namespace gpipe {
namespace {

struct Span {
  int64_t pid;
  std::string cat;
  int64_t step;
  int64_t micro_batch;
  double begin;
  double end;
};

struct Trace {
  Json json;
  std::vector<Span> spans;
  std::vector<std::pair<const Json*, const Json*>> flows;  // (s, f)
  std::vector<Span> async;  // async spans (transfers, all-reduce buckets): "b" to "e"
};

absl::StatusOr<Trace> ReadTrace(const std::string& path) {
  auto text = ReadWholeFile(path);
  if (!text.ok()) return text.status();
  auto json = ParseJson(*text, path);
  if (!json.ok()) return json.status();
  Trace trace{*std::move(json), {}, {}};
  std::map<int64_t, const Json*> starts;
  std::map<std::string, size_t> open;  // async id -> index in trace.async
  for (const Json& e : trace.json.at("traceEvents")) {
    const std::string& ph = e.at("ph").get<std::string>();
    if (ph == "b") {
      const Json& args = e.at("args");
      const Json* mb = JsonFind(args, "micro_batch");
      open[e.at("id").get<std::string>()] = trace.async.size();
      trace.async.push_back({e.at("pid").get<int64_t>(), e.at("cat").get<std::string>(),
                             args.at("step").get<int64_t>(), mb ? mb->get<int64_t>() : -1,
                             e.at("ts").get<double>(), -1});
    } else if (ph == "e") {
      trace.async.at(open.at(e.at("id").get<std::string>())).end = e.at("ts").get<double>();
    } else if (ph == "X") {
      const Json& args = e.at("args");
      const Json* mb = JsonFind(args, "micro_batch");
      const double begin = e.at("ts").get<double>();
      trace.spans.push_back({e.at("pid").get<int64_t>(), e.at("cat").get<std::string>(),
                             args.at("step").get<int64_t>(), mb ? mb->get<int64_t>() : -1, begin,
                             begin + e.at("dur").get<double>()});
    } else if (ph == "s") {
      starts[e.at("id").get<int64_t>()] = &e;
    } else if (ph == "f") {
      trace.flows.emplace_back(starts.at(e.at("id").get<int64_t>()), &e);
    }
  }
  return trace;
}

int Count(const Trace& trace, int64_t pid, const std::string& cat, int64_t step) {
  int n = 0;
  for (const Span& s : trace.spans) n += s.pid == pid && s.cat == cat && s.step == step;
  return n;
}

TEST(TraceTest, ATracedRunRecordsEveryInstructionWithAlignedClocks) {
  const std::string path = absl::StrCat(::gpipe::testing::ProcessScratchDir(), "/trace_gpipe.json");
  constexpr int kStages = 4, kMicroBatches = 4, kSteps = 3;
  const testing::ProcessResult run = testing::RunProcess(
      {testing::BinPath("gpipe-run"), testing::SourcePath("examples/mlp/plan.pbtxt"), "--override",
       absl::StrCat("training { steps: ", kSteps, " } pipeline { stages: ", kStages,
                    " micro_batches: ", kMicroBatches, " schedule: GPIPE }"),
       "--trace", path},
      240);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, absl::StrCat("wrote the trace to ", path)))
      << run.output;
  auto trace = ReadTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.status();

  const Json& other = trace->json.at("otherData");
  EXPECT_EQ(other.at("status").get<std::string>(), "ok");
  EXPECT_EQ(other.at("schedule").get<std::string>(), "GPIPE");
  EXPECT_EQ(other.at("ranks").get<int64_t>(), kStages);
  EXPECT_TRUE(other.at("missing_ranks").empty());
  double uncertainty_us = 0;
  for (const Json& u : other.at("clock_uncertainty_us")) {
    uncertainty_us = std::max(uncertainty_us, u.get<double>());
  }
  EXPECT_LT(uncertainty_us, 50'000.0);  // a sane estimate, even on a loaded machine

  for (int64_t step = 0; step < kSteps; ++step) {
    for (int64_t rank = 0; rank < kStages; ++rank) {
      EXPECT_EQ(Count(*trace, rank, "step", step), 1) << "rank " << rank << " step " << step;
      EXPECT_EQ(Count(*trace, rank, "forward", step), kMicroBatches);
      EXPECT_EQ(Count(*trace, rank, "backward", step), kMicroBatches);
      EXPECT_EQ(Count(*trace, rank, "sync", step), 1);
      EXPECT_EQ(Count(*trace, rank, "optimizer", step), 1);
      EXPECT_EQ(Count(*trace, rank, "recv_wait", step),
                kMicroBatches * ((rank > 0) + (rank < kStages - 1)));
    }
  }
  // Every rank's transfers, matched send to receive: bytes, time in flight, the part exposed.
  const Json& overlap = other.at("transfer_overlap");
  ASSERT_EQ(overlap.size(), static_cast<size_t>(kStages));
  for (int64_t rank = 0; rank < kStages; ++rank) {
    const Json& r = overlap[rank];
    EXPECT_EQ(r.at("rank").get<int64_t>(), rank);
    EXPECT_EQ(r.at("transfers_received").get<int64_t>(),
              kSteps * kMicroBatches * ((rank > 0) + (rank < kStages - 1)));
    EXPECT_GT(r.at("bytes_received").get<int64_t>(), 0);
    EXPECT_EQ(r.at("bytes_sent").get<int64_t>(), r.at("bytes_received").get<int64_t>());
    EXPECT_LE(r.at("exposed_ms").get<double>(), r.at("in_flight_ms").get<double>() + 1e-9);
    EXPECT_GE(r.at("hidden_fraction").get<double>(), 0.0);
    EXPECT_LE(r.at("hidden_fraction").get<double>(), 1.0);
  }
  EXPECT_TRUE(absl::StrContains(run.output, "transfers of stage 3, replica 0: received"))
      << run.output;

  // One arrow per boundary transfer: activations and gradients over K-1 links.
  EXPECT_EQ(trace->flows.size(), static_cast<size_t>(kSteps * 2 * (kStages - 1) * kMicroBatches));

  // Causality across ranks, on rank 0's clock: arrows point forward in time, and stage s+1
  // forwards micro-batch m only after stage s has finished forwarding it.
  const double slack = 2 * uncertainty_us + 1.0;
  for (const auto& [s, f] : trace->flows) {
    EXPECT_LE(s->at("ts").get<double>(), f->at("ts").get<double>() + slack);
  }
  std::map<std::tuple<int64_t, int64_t, int64_t>, Span> forwards;  // (rank, step, mb)
  for (const Span& s : trace->spans) {
    if (s.cat == "forward") forwards[{s.pid, s.step, s.micro_batch}] = s;
  }
  for (const auto& [key, span] : forwards) {
    const auto [rank, step, mb] = key;
    if (rank == 0) continue;
    const Span& before = forwards.at({rank - 1, step, mb});
    EXPECT_GE(span.begin + slack, before.end)
        << "rank " << rank << " step " << step << " mb " << mb;
  }

  // The trace draws: gpipe-plan timeline reads it and reports every stage's bubble.
  const std::string svg = absl::StrCat(::gpipe::testing::ProcessScratchDir(), "/trace_gpipe.svg");
  const testing::ProcessResult drawn =
      testing::RunProcess({testing::BinPath("gpipe-plan"), "timeline", path, "-o", svg}, 60);
  ASSERT_EQ(drawn.exit_code, 0) << drawn.output;
  for (int stage = 0; stage < kStages; ++stage) {
    EXPECT_TRUE(absl::StrContains(drawn.output, absl::StrCat("stage ", stage, ": busy ")))
        << drawn.output;
  }
  EXPECT_TRUE(absl::StrContains(drawn.output, absl::StrCat("step ", kSteps - 1, ", ")))
      << drawn.output;
  auto picture = ReadWholeFile(svg);
  ASSERT_TRUE(picture.ok()) << picture.status();
  EXPECT_TRUE(absl::StrContains(*picture, "<svg")) << picture->substr(0, 200);
}

TEST(TraceTest, TraceStepsLimitsTheRecordedSteps) {
  const std::string path =
      absl::StrCat(::gpipe::testing::ProcessScratchDir(), "/trace_limited.json");
  const testing::ProcessResult run = testing::RunProcess(
      {testing::BinPath("gpipe-run"), testing::SourcePath("examples/mlp/plan.pbtxt"), "--override",
       "training { steps: 4 } pipeline { stages: 2 micro_batches: 2 schedule: ONE_F_ONE_B } "
       "runtime { trace_steps: 1 }",
       "--trace", path},
      240);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto trace = ReadTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.status();
  for (const Span& s : trace->spans) EXPECT_EQ(s.step, 0) << s.cat;
  EXPECT_EQ(Count(*trace, 1, "forward", 0), 2);
}

TEST(TraceTest, AFailedRunStillWritesItsTrace) {
  // The last stage runs out of its memory budget in step 0 (see launch_failure_test).
  const std::string path =
      absl::StrCat(::gpipe::testing::ProcessScratchDir(), "/trace_failed.json");
  std::vector<std::string> argv = testing::MpirunPrefix(3);
  argv.insert(argv.end(),
              {testing::BinPath("gpipe-worker"), "--plan",
               testing::SourcePath("tests/e2e/testdata/out_of_memory.pbtxt"), "--trace", path});
  const testing::ProcessResult run = testing::RunProcess(argv, 60);
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_FALSE(run.timed_out) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "wrote the trace of the failed run to")) << run.output;
  auto trace = ReadTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.status() << "\n" << run.output;
  const Json& other = trace->json.at("otherData");
  EXPECT_TRUE(absl::StrContains(other.at("status").get<std::string>(), "exceeds the limit"))
      << other.at("status").get<std::string>();
  EXPECT_TRUE(other.at("missing_ranks").empty()) << run.output;
  bool failing_rank_named = false;
  for (const Json& e : other.at("rank_errors")) {
    failing_rank_named |= e.at("rank").get<int64_t>() == 2 &&
                          absl::StrContains(e.at("error").get<std::string>(), "exceeds the limit");
  }
  EXPECT_TRUE(failing_rank_named);
  // Rank 0 forwarded every micro-batch before the failure; the failed step's span is there.
  EXPECT_EQ(Count(*trace, 0, "forward", 0), 8);
  EXPECT_EQ(Count(*trace, 2, "step", 0), 1);
}

TEST(TraceTest, ReplicaAllReducesOverlapTheBackward) {
  // K=2 stages x D=2 replicas, one all-reduce bucket per layer: each rank's buckets start
  // during its last backward (the last layers' gradients are final while the first layers'
  // are still being computed) and the trace shows them beside the compute.
  const std::string path =
      absl::StrCat(::gpipe::testing::ProcessScratchDir(), "/trace_replicas.json");
  constexpr int kSteps = 2;
  const testing::ProcessResult run = testing::RunProcess(
      {testing::BinPath("gpipe-run"), testing::SourcePath("examples/mlp/plan.pbtxt"), "--override",
       absl::StrCat("training { steps: ", kSteps,
                    " } pipeline { stages: 2 data_parallel: 2 micro_batches: 4 } runtime { "
                    "gradient_bucket_bytes: 1 }"),
       "--trace", path},
      240);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto trace = ReadTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->json.at("otherData").at("ranks").get<int64_t>(), 4);
  for (int64_t rank = 0; rank < 4; ++rank) {
    for (int64_t step = 0; step < kSteps; ++step) {
      SCOPED_TRACE(absl::StrCat("rank ", rank, " step ", step));
      double last_backward_end = 0, first_bucket_begin = 1e300, last_bucket_end = 0;
      int buckets = 0;
      for (const Span& s : trace->spans) {
        if (s.pid == rank && s.step == step && s.cat == "backward") {
          last_backward_end = std::max(last_backward_end, s.end);
        }
      }
      for (const Span& s : trace->async) {
        if (s.pid != rank || s.step != step || s.cat != "allreduce_bucket") continue;
        ++buckets;
        EXPECT_GE(s.end, s.begin);
        first_bucket_begin = std::min(first_bucket_begin, s.begin);
        last_bucket_end = std::max(last_bucket_end, s.end);
      }
      // Balanced on parameters, stage 0 holds fc1, fc2, norm2 and stage 1 fc3, fc4, head: three
      // layers with parameters each, a bucket each.
      EXPECT_EQ(buckets, 3);
      EXPECT_LT(first_bucket_begin, last_backward_end);
      EXPECT_GE(last_bucket_end, first_bucket_begin);
    }
  }
}

}  // namespace
}  // namespace gpipe

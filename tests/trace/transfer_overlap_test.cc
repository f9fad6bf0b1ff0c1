// SummarizeTransferOverlap on hand-made traces: a transfer is in flight from the later of its
// send's and receive's posts to the receive's completion; the receiving instruction's wait
// inside that span is exposed; clock offsets apply; a send that seems to follow its receive's
// completion (clock skew) counts as instantaneous.
#include "runtime/trace/transfer_overlap.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/trace/trace_recorder.h"

namespace gpipe {
namespace {

using ::testing::HasSubstr;

TraceEvent Event(TraceKind kind, int64_t begin, int64_t end, int peer, int micro_batch,
                 int64_t bytes = 0) {
  TraceEvent e;
  e.kind = kind;
  e.begin_ns = begin;
  e.end_ns = end;
  e.peer = peer;
  e.micro_batch = micro_batch;
  e.chunk = 0;
  e.bytes = bytes;
  return e;
}

pb::RankTrace Trace(int rank, int stage, const std::vector<TraceEvent>& events,
                    int64_t offset = 0) {
  TraceRecorder recorder;
  for (const TraceEvent& e : events) recorder.Add(e);
  pb::RankTrace trace = recorder.ToProto(rank, stage, 0);
  trace.set_clock_offset_ns(offset);
  return trace;
}

TEST(TransferOverlapTest, TheWaitInsideTheFlightIsExposed) {
  // Micro-batch 0: sent at 1 ms, receive posted at 0.5 ms, complete at 3 ms, the receive
  // instruction blocked from 2.5 to 3.2 ms: 2 ms in flight, 0.5 ms exposed.
  // Micro-batch 1: the receiver waited 1 ms for a send not yet posted (the pipeline), then
  // 0.2 ms of the transfer: 0.2 ms exposed.
  const pb::RankTrace sender =
      Trace(0, 0,
            {Event(TraceKind::kTransferActivationOut, 1'000'000, 3'100'000, 1, 0, 4096),
             Event(TraceKind::kTransferActivationOut, 5'000'000, 5'300'000, 1, 1, 4096)});
  // The receiver's clock runs 10 ms behind rank 0's: its offset brings it back.
  const int64_t lag = 10'000'000;
  const pb::RankTrace receiver =
      Trace(1, 1,
            {Event(TraceKind::kTransferActivationIn, 500'000 - lag, 3'000'000 - lag, 0, 0, 4096),
             Event(TraceKind::kRecvActivation, 2'500'000 - lag, 3'200'000 - lag, 0, 0),
             Event(TraceKind::kTransferActivationIn, 3'200'000 - lag, 5'200'000 - lag, 0, 1, 4096),
             Event(TraceKind::kRecvActivation, 4'000'000 - lag, 5'200'000 - lag, 0, 1)},
            lag);
  const std::vector<RankTransferOverlap> overlap =
      SummarizeTransferOverlap({receiver, sender}, /*stages=*/2);
  ASSERT_EQ(overlap.size(), 2u);
  EXPECT_EQ(overlap[0].rank, 0);
  EXPECT_EQ(overlap[0].bytes_sent, 8192);
  EXPECT_EQ(overlap[0].transfers_received, 0);
  EXPECT_DOUBLE_EQ(overlap[0].hidden_fraction(), 1.0);
  const RankTransferOverlap& r = overlap[1];
  EXPECT_EQ(r.bytes_received, 8192);
  EXPECT_EQ(r.transfers_received, 2);
  EXPECT_NEAR(r.in_flight_ms, 2.0 + 0.2, 1e-9);
  EXPECT_NEAR(r.exposed_ms, 0.5 + 0.2, 1e-9);
  EXPECT_NEAR(r.hidden_fraction(), 1.0 - 0.7 / 2.2, 1e-9);
  EXPECT_THAT(FormatTransferOverlap(overlap),
              HasSubstr("stage 1, replica 0: received 0.01 MiB in 2 transfers, 2.20 ms in "
                        "flight, 0.70 ms exposed, 68.2% hidden; sent 0.00 MiB"));
}

TEST(TransferOverlapTest, ASendThatSeemsLaterThanItsArrivalCountsAsInstantaneous) {
  // A gradient from stage 1 (rank 1) to stage 0 (rank 0).
  const pb::RankTrace sender =
      Trace(1, 1, {Event(TraceKind::kTransferGradOut, 4'000'000, 4'100'000, 0, 0, 64)});
  const pb::RankTrace receiver =
      Trace(0, 0,
            {Event(TraceKind::kTransferGradIn, 1'000'000, 3'000'000, 1, 0, 64),
             Event(TraceKind::kRecvGrad, 2'000'000, 3'000'000, 1, 0)});
  const std::vector<RankTransferOverlap> overlap = SummarizeTransferOverlap({sender, receiver}, 2);
  EXPECT_EQ(overlap[0].transfers_received, 1);
  EXPECT_DOUBLE_EQ(overlap[0].in_flight_ms, 0.0);
  EXPECT_DOUBLE_EQ(overlap[0].exposed_ms, 0.0);
}

}  // namespace
}  // namespace gpipe

#include "runtime/trace/transfer_overlap.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/trace/trace_event.h"
#include "runtime/trace/trace_recorder.h"

namespace gpipe {
namespace {

// One transfer as both ends name it: (sender, receiver, activation?, eval, step, micro-batch,
// the receiver's chunk).
using TransferId = std::tuple<int, int, bool, bool, int64_t, int, int>;

struct Span {
  int64_t begin = 0;
  int64_t end = 0;
};

int64_t Overlap(const Span& a, const Span& b) {
  return std::max<int64_t>(0, std::min(a.end, b.end) - std::max(a.begin, b.begin));
}

std::string MiB(int64_t bytes) { return absl::StrFormat("%.2f MiB", bytes / 1048576.0); }

}  // namespace

std::vector<RankTransferOverlap> SummarizeTransferOverlap(const std::vector<pb::RankTrace>& ranks,
                                                          int stages) {
  std::map<TransferId, Span> sends;     // post .. observed completion, on rank 0's clock
  std::map<TransferId, Span> arrivals;  // receive post .. completion
  std::map<TransferId, Span> waits;     // the receive instruction's span
  std::map<TransferId, int64_t> bytes;
  std::map<int, RankTransferOverlap> by_rank;
  for (const pb::RankTrace& trace : ranks) {
    RankTransferOverlap& summary = by_rank[trace.rank()];
    summary.rank = trace.rank();
    summary.stage = trace.stage();
    summary.replica = trace.replica();
    for (TraceEvent e : EventsFromProto(trace)) {
      e.begin_ns += trace.clock_offset_ns();
      e.end_ns += trace.clock_offset_ns();
      const Span span{e.begin_ns, e.end_ns};
      const int me = trace.rank();
      switch (e.kind) {
        case TraceKind::kTransferActivationOut:
        case TraceKind::kTransferGradOut: {
          const bool activation = e.kind == TraceKind::kTransferActivationOut;
          // A send's event names the sending chunk; the receiver's is one on where the
          // pipeline wraps (the last stage's activations, the first stage's gradients).
          int chunk = e.chunk;
          if (activation && trace.stage() == stages - 1) ++chunk;
          if (!activation && trace.stage() == 0) --chunk;
          sends[{me, e.peer, activation, e.eval, e.step, e.micro_batch, chunk}] = span;
          summary.bytes_sent += e.bytes;
          break;
        }
        case TraceKind::kTransferActivationIn:
        case TraceKind::kTransferGradIn: {
          const bool activation = e.kind == TraceKind::kTransferActivationIn;
          const TransferId id{e.peer, me, activation, e.eval, e.step, e.micro_batch, e.chunk};
          arrivals[id] = span;
          bytes[id] = e.bytes;
          summary.bytes_received += e.bytes;
          break;
        }
        case TraceKind::kRecvActivation:
        case TraceKind::kRecvGrad: {
          const bool activation = e.kind == TraceKind::kRecvActivation;
          waits[{e.peer, me, activation, e.eval, e.step, e.micro_batch, e.chunk}] = span;
          break;
        }
        default:
          break;
      }
    }
  }
  for (const auto& [id, arrival] : arrivals) {
    const auto send = sends.find(id);
    if (send == sends.end()) continue;  // the sender's events were dropped or not recorded
    // On rank 0's clock a send may seem posted after its receive completed: the ranks' clocks
    // are aligned only to within the trace's clock_uncertainty_us. Such a transfer counts as
    // instantaneous.
    const Span in_flight{std::min(std::max(send->second.begin, arrival.begin), arrival.end),
                         arrival.end};
    RankTransferOverlap& summary = by_rank[std::get<1>(id)];
    ++summary.transfers_received;
    summary.in_flight_ms += (in_flight.end - in_flight.begin) / 1e6;
    if (const auto wait = waits.find(id); wait != waits.end()) {
      summary.exposed_ms += Overlap(in_flight, wait->second) / 1e6;
    }
  }
  std::vector<RankTransferOverlap> out;
  for (auto& [rank, summary] : by_rank) out.push_back(summary);
  return out;
}

std::string FormatTransferOverlap(const std::vector<RankTransferOverlap>& overlap) {
  std::string out;
  for (const RankTransferOverlap& r : overlap) {
    absl::StrAppend(&out, "stage ", r.stage, ", replica ", r.replica, ": received ",
                    MiB(r.bytes_received), " in ", r.transfers_received, " transfers, ",
                    absl::StrFormat("%.2f ms in flight, %.2f ms exposed, %.1f%% hidden",
                                    r.in_flight_ms, r.exposed_ms, 100.0 * r.hidden_fraction()),
                    "; sent ", MiB(r.bytes_sent), "\n");
  }
  return out;
}

}  // namespace gpipe

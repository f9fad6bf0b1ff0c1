#include "runtime/trace/chrome_trace.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/core/file_io.h"
#include "runtime/core/json.h"
#include "runtime/trace/trace_event.h"
#include "runtime/trace/trace_recorder.h"
#include "runtime/trace/transfer_overlap.h"

namespace gpipe {
namespace {

constexpr const char* kTrackNames[kTraceTracks] = {"steps", "compute", "comm", "transfers"};

bool IsActivation(TraceKind kind) {
  return kind == TraceKind::kRecvActivation || kind == TraceKind::kSendActivation ||
         kind == TraceKind::kTransferActivationOut || kind == TraceKind::kTransferActivationIn;
}

std::string EventName(const TraceEvent& e, int chunks) {
  const std::string chunk_suffix = chunks > 1 && e.chunk >= 0 ? absl::StrCat(".", e.chunk) : "";
  const std::string mb = absl::StrCat(e.micro_batch, chunk_suffix);
  switch (e.kind) {
    case TraceKind::kStep:
      return absl::StrCat("step ", e.step);
    case TraceKind::kEval:
      return absl::StrCat("eval after step ", e.step);
    case TraceKind::kForward:
      return absl::StrCat("F", mb);
    case TraceKind::kBackward:
    case TraceKind::kBackwardInput:
      return absl::StrCat("B", mb);
    case TraceKind::kBackwardWeight:
      return absl::StrCat("W", mb);
    case TraceKind::kLoad:
      return absl::StrCat("load ", mb);
    case TraceKind::kOptimizer:
      return "optimizer";
    case TraceKind::kAllReduce:
      return "allreduce";
    case TraceKind::kRecvActivation:
      return absl::StrCat("recv act ", mb);
    case TraceKind::kRecvGrad:
      return absl::StrCat("recv grad ", mb);
    case TraceKind::kSendActivation:
      return absl::StrCat("send act ", mb);
    case TraceKind::kSendGrad:
      return absl::StrCat("send grad ", mb);
    case TraceKind::kSync:
      return "gradient sync";
    case TraceKind::kTransferActivationOut:
      return absl::StrCat("act ", mb, " -> rank ", e.peer);
    case TraceKind::kTransferGradOut:
      return absl::StrCat("grad ", mb, " -> rank ", e.peer);
    case TraceKind::kTransferActivationIn:
      return absl::StrCat("act ", mb, " <- rank ", e.peer);
    case TraceKind::kTransferGradIn:
      return absl::StrCat("grad ", mb, " <- rank ", e.peer);
    case TraceKind::kAllReduceBucket:
      return absl::StrCat("allreduce bucket ", mb);
    case TraceKind::kRecvSkip:
      return absl::StrCat("recv skip ", mb);
    case TraceKind::kSendSkip:
      return absl::StrCat("send skip ", mb);
    case TraceKind::kTransferSkipOut:
      return absl::StrCat("skip ", mb, " -> rank ", e.peer);
    case TraceKind::kTransferSkipIn:
      return absl::StrCat("skip ", mb, " <- rank ", e.peer);
  }
  return "?";
}

// Microseconds with nanosecond resolution.
std::string Micros(int64_t ns) { return absl::StrFormat("%.3f", static_cast<double>(ns) / 1e3); }

// A send and the receive it feeds: (receiver rank, sender rank, activation?, eval, step,
// micro-batch, the receiver's chunk).
using TransferMatch = std::tuple<int, int, bool, bool, int64_t, int, int>;

// A receive instruction and the rank that ran it.
struct Located {
  int rank;
  const TraceEvent* event;
};

}  // namespace

std::string FormatChromeTrace(const TraceRunInfo& info, const std::vector<pb::RankTrace>& ranks) {
  // Events of every rank on rank 0's clock.
  std::vector<std::pair<const pb::RankTrace*, std::vector<TraceEvent>>> all;
  int64_t origin = std::numeric_limits<int64_t>::max();
  for (const pb::RankTrace& rank : ranks) {
    std::vector<TraceEvent> events = EventsFromProto(rank);
    for (TraceEvent& e : events) {
      e.begin_ns += rank.clock_offset_ns();
      e.end_ns += rank.clock_offset_ns();
      origin = std::min(origin, e.begin_ns);
    }
    all.emplace_back(&rank, std::move(events));
  }
  std::sort(all.begin(), all.end(),
            [](const auto& a, const auto& b) { return a.first->rank() < b.first->rank(); });
  if (origin == std::numeric_limits<int64_t>::max()) origin = 0;
  const auto ts = [origin](int64_t ns) { return Micros(ns - origin); };

  std::string out;
  out.reserve(1 << 20);
  bool first = true;
  const auto emit = [&out, &first](const std::string& event) {
    absl::StrAppend(&out, first ? "\n" : ",\n", event);
    first = false;
  };

  // Header: the run's facts, and per rank (index = rank; null for a rank that never reported)
  // the clock alignment and the events dropped.
  std::map<int, const pb::RankTrace*> by_rank;
  std::string errors;
  for (const auto& [rank, unused] : all) {
    by_rank[rank->rank()] = rank;
    if (!rank->error().empty()) {
      absl::StrAppend(&errors, errors.empty() ? "" : ", ", "{\"rank\": ", rank->rank(),
                      ", \"error\": ", JsonQuote(rank->error()), "}");
    }
  }
  std::string offsets, uncertainties, dropped, missing;
  const int listed = std::max(info.ranks, by_rank.empty() ? 0 : by_rank.rbegin()->first + 1);
  for (int r = 0; r < listed; ++r) {
    const char* sep = r == 0 ? "" : ", ";
    const auto it = by_rank.find(r);
    if (it == by_rank.end()) {
      absl::StrAppend(&offsets, sep, "null");
      absl::StrAppend(&uncertainties, sep, "null");
      absl::StrAppend(&dropped, sep, "null");
      absl::StrAppend(&missing, missing.empty() ? "" : ", ", r);
      continue;
    }
    absl::StrAppend(&offsets, sep, Micros(it->second->clock_offset_ns()));
    absl::StrAppend(&uncertainties, sep, Micros(it->second->clock_uncertainty_ns()));
    absl::StrAppend(&dropped, sep, it->second->dropped());
  }
  // How much of the boundary transfers the compute hid, per rank.
  std::string overlap;
  for (const RankTransferOverlap& r : SummarizeTransferOverlap(ranks, info.stages)) {
    absl::StrAppend(&overlap, overlap.empty() ? "" : ", ", "{\"rank\": ", r.rank,
                    ", \"stage\": ", r.stage, ", \"replica\": ", r.replica,
                    ", \"bytes_sent\": ", r.bytes_sent, ", \"bytes_received\": ", r.bytes_received,
                    ", \"transfers_received\": ", r.transfers_received,
                    absl::StrFormat(", \"in_flight_ms\": %.4f, \"exposed_ms\": %.4f, "
                                    "\"hidden_fraction\": %.4f}",
                                    r.in_flight_ms, r.exposed_ms, r.hidden_fraction()));
  }
  absl::StrAppend(&out, "{\"displayTimeUnit\": \"ms\",\n\"otherData\": {\"generator\": \"gpipe\", ",
                  "\"format\": 1, \"plan\": ", JsonQuote(info.plan),
                  ", \"schedule\": ", JsonQuote(info.schedule),
                  ", \"remat\": ", JsonQuote(info.remat), ", \"device\": ", JsonQuote(info.device),
                  ", \"stages\": ", info.stages, ", \"micro_batches\": ", info.micro_batches,
                  ", \"chunks\": ", info.chunks, ", \"ranks\": ", info.ranks,
                  ", \"status\": ", JsonQuote(info.status), ", \"clock_offset_us\": [", offsets,
                  "], \"clock_uncertainty_us\": [", uncertainties, "], \"dropped_events\": [",
                  dropped, "], \"missing_ranks\": [", missing, "], \"rank_errors\": [", errors,
                  "], \"transfer_overlap\": [", overlap, "]},\n", "\"traceEvents\": [");

  // Names: a process per rank, a thread per track.
  for (const auto& [rank, unused] : all) {
    const int pid = rank->rank();
    emit(absl::StrCat(
        "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": ", pid,
        ", \"tid\": 0, \"args\": {\"name\": ",
        JsonQuote(absl::StrCat("stage ", rank->stage(), ", replica ", rank->replica())), "}}"));
    emit(absl::StrCat("{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": ", pid,
                      ", \"tid\": 0, \"args\": {\"sort_index\": ", pid, "}}"));
    for (int t = 0; t < kTraceTracks; ++t) {
      emit(absl::StrCat("{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": ", pid,
                        ", \"tid\": ", t, ", \"args\": {\"name\": \"", kTrackNames[t], "\"}}"));
      emit(absl::StrCat("{\"ph\": \"M\", \"name\": \"thread_sort_index\", \"pid\": ", pid,
                        ", \"tid\": ", t, ", \"args\": {\"sort_index\": ", t, "}}"));
    }
  }

  // Spans, transfers, and the receives that flows end at.
  std::map<TransferMatch, Located> receives;
  int64_t async_id = 0;
  for (const auto& [rank, events] : all) {
    const int pid = rank->rank();
    for (const TraceEvent& e : events) {
      const std::string name = JsonQuote(EventName(e, info.chunks));
      const int tid = static_cast<int>(TrackOf(e.kind));
      std::string args = absl::StrCat("{\"step\": ", e.step, ", \"stage\": ", rank->stage());
      if (e.micro_batch >= 0) {
        absl::StrAppend(
            &args, e.kind == TraceKind::kAllReduceBucket ? ", \"bucket\": " : ", \"micro_batch\": ",
            e.micro_batch);
      }
      if (e.chunk >= 0) absl::StrAppend(&args, ", \"chunk\": ", e.chunk);
      if (e.instruction >= 0) absl::StrAppend(&args, ", \"instruction\": ", e.instruction);
      if (e.peer >= 0) absl::StrAppend(&args, ", \"peer\": ", e.peer);
      if (e.bytes > 0) absl::StrAppend(&args, ", \"bytes\": ", e.bytes);
      absl::StrAppend(&args, ", \"eval\": ", e.eval ? "true" : "false", "}");
      if (TrackOf(e.kind) == TraceTrack::kTransfers) {
        const std::string id = absl::StrCat("\"t", pid, ".", async_id++, "\"");
        const std::string common =
            absl::StrCat("\"cat\": \"", CategoryOf(e.kind), "\", \"name\": ", name,
                         ", \"id\": ", id, ", \"pid\": ", pid, ", \"tid\": ", tid);
        emit(absl::StrCat("{\"ph\": \"b\", ", common, ", \"ts\": ", ts(e.begin_ns),
                          ", \"args\": ", args, "}"));
        emit(absl::StrCat("{\"ph\": \"e\", ", common, ", \"ts\": ", ts(e.end_ns), "}"));
        continue;
      }
      emit(absl::StrCat("{\"ph\": \"X\", \"cat\": \"", CategoryOf(e.kind), "\", \"name\": ", name,
                        ", \"pid\": ", pid, ", \"tid\": ", tid, ", \"ts\": ", ts(e.begin_ns),
                        ", \"dur\": ", Micros(e.end_ns - e.begin_ns), ", \"args\": ", args, "}"));
      if (e.kind == TraceKind::kStep && pid == 0) {
        emit(absl::StrCat("{\"ph\": \"i\", \"s\": \"g\", \"name\": ", name,
                          ", \"pid\": 0, \"tid\": 0, \"ts\": ", ts(e.begin_ns), "}"));
      }
      if (e.kind == TraceKind::kRecvActivation || e.kind == TraceKind::kRecvGrad) {
        receives.emplace(TransferMatch{pid, e.peer, IsActivation(e.kind), e.eval, e.step,
                                       e.micro_batch, e.chunk},
                         Located{pid, &e});
      }
    }
  }

  // Flow arrows: from the start of each send instruction to the end of the receive that
  // consumed it (the data had arrived by then), inside both spans so viewers bind them. A
  // send's transfer key names the receiver's chunk: the pipeline wraps from the last stage to
  // chunk + 1 of the first (and gradients back from the first stage to chunk - 1 of the last).
  int64_t flow_id = 0;
  for (const auto& [rank, events] : all) {
    const int pid = rank->rank();
    const int stage = rank->stage();
    for (const TraceEvent& e : events) {
      if (e.kind != TraceKind::kSendActivation && e.kind != TraceKind::kSendGrad) continue;
      const bool activation = e.kind == TraceKind::kSendActivation;
      int receiver_chunk = e.chunk;
      if (activation && stage == info.stages - 1) ++receiver_chunk;
      if (!activation && stage == 0) --receiver_chunk;
      const auto it = receives.find(
          TransferMatch{e.peer, pid, activation, e.eval, e.step, e.micro_batch, receiver_chunk});
      if (it == receives.end()) continue;
      const TraceEvent& recv = *it->second.event;
      const char* flow_name = activation ? "activation" : "gradient";
      ++flow_id;
      emit(absl::StrCat("{\"ph\": \"s\", \"cat\": \"flow\", \"name\": \"", flow_name,
                        "\", \"id\": ", flow_id, ", \"pid\": ", pid, ", \"tid\": ",
                        static_cast<int>(TraceTrack::kComm), ", \"ts\": ", ts(e.begin_ns), "}"));
      emit(absl::StrCat("{\"ph\": \"f\", \"bp\": \"e\", \"cat\": \"flow\", \"name\": \"", flow_name,
                        "\", \"id\": ", flow_id, ", \"pid\": ", it->second.rank,
                        ", \"tid\": ", static_cast<int>(TraceTrack::kComm),
                        ", \"ts\": ", ts(std::max(recv.begin_ns, recv.end_ns - 1)), "}"));
    }
  }
  absl::StrAppend(&out, "\n]}\n");
  return out;
}

absl::Status WriteChromeTrace(const std::string& path, const TraceRunInfo& info,
                              const std::vector<pb::RankTrace>& ranks) {
  return WriteFileAtomically(path, FormatChromeTrace(info, ranks));
}

}  // namespace gpipe

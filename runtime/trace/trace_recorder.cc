#include "runtime/trace/trace_recorder.h"

#include <algorithm>

namespace gpipe {

TraceRecorder::TraceRecorder(TraceRecorderOptions options)
    : options_(options), epoch_(std::chrono::steady_clock::now()) {}

int64_t TraceRecorder::NowNs() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                              epoch_)
      .count();
}

int64_t TraceRecorder::EpochNs() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(epoch_.time_since_epoch()).count();
}

bool TraceRecorder::Records(int64_t step, bool eval) const {
  if (options_.steps <= 0) return true;
  const int64_t training_step = eval ? step - 1 : step;
  return training_step < options_.steps;
}

void TraceRecorder::Add(const TraceEvent& event) {
  if (static_cast<int64_t>(events_.size()) >= options_.max_events) {
    ++dropped_;
    return;
  }
  events_.push_back(event);
}

pb::RankTrace TraceRecorder::ToProto(int rank, int stage, int replica, size_t first) const {
  pb::RankTrace trace;
  trace.set_rank(rank);
  trace.set_stage(stage);
  trace.set_replica(replica);
  trace.set_dropped(dropped_);
  first = std::min(first, events_.size());
  trace.mutable_events()->Reserve(static_cast<int>(events_.size() - first));
  for (size_t i = first; i < events_.size(); ++i) {
    const TraceEvent& e = events_[i];
    pb::TraceEventProto* p = trace.add_events();
    p->set_track(static_cast<int32_t>(TrackOf(e.kind)));
    p->set_kind(static_cast<int32_t>(e.kind));
    p->set_begin_ns(e.begin_ns);
    p->set_end_ns(e.end_ns);
    p->set_step(e.step);
    if (e.micro_batch >= 0) p->set_micro_batch(e.micro_batch);
    if (e.chunk >= 0) p->set_chunk(e.chunk);
    if (e.instruction >= 0) p->set_instruction(e.instruction);
    if (e.peer >= 0) p->set_peer(e.peer);
    if (e.bytes > 0) p->set_bytes(e.bytes);
    if (e.eval) p->set_eval(true);
  }
  return trace;
}

std::vector<TraceEvent> EventsFromProto(const pb::RankTrace& trace) {
  std::vector<TraceEvent> events;
  events.reserve(trace.events_size());
  for (const pb::TraceEventProto& p : trace.events()) {
    if (!IsValidTraceKind(p.kind())) continue;
    TraceEvent e;
    e.kind = static_cast<TraceKind>(p.kind());
    e.begin_ns = p.begin_ns();
    e.end_ns = p.end_ns();
    e.step = p.step();
    e.micro_batch = p.micro_batch();
    e.chunk = p.chunk();
    e.instruction = p.instruction();
    e.peer = p.peer();
    e.bytes = p.bytes();
    e.eval = p.eval();
    events.push_back(e);
  }
  return events;
}

TraceSpan::TraceSpan(TraceRecorder* recorder, const TraceEvent& event)
    : recorder_(recorder != nullptr && recorder->Records(event.step, event.eval) ? recorder
                                                                                 : nullptr),
      event_(event) {
  if (recorder_ != nullptr) event_.begin_ns = recorder_->NowNs();
}

TraceSpan::~TraceSpan() {
  if (recorder_ == nullptr) return;
  event_.end_ns = recorder_->NowNs();
  recorder_->Add(event_);
}

}  // namespace gpipe

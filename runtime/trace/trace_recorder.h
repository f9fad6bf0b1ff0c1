// TraceRecorder: one rank's record of a traced run. The executor and the worker add events as
// they happen; at the end (or on failure) they are converted to a pb::RankTrace and merged on
// rank 0. Times come from the monotonic clock, in nanoseconds since the recorder was made (the
// rank's trace epoch); rank 0 learns each rank's offset to its own epoch (trace_session.h).
// Memory is bounded: past max_events, events are counted as dropped instead of kept.
// Single-threaded, like the executor.
#ifndef GPIPE_RUNTIME_TRACE_TRACE_RECORDER_H_
#define GPIPE_RUNTIME_TRACE_TRACE_RECORDER_H_

#include <chrono>
#include <cstdint>
#include <vector>

#include "proto/control.pb.h"
#include "runtime/trace/trace_event.h"

namespace gpipe {

struct TraceRecorderOptions {
  // Training steps [0, steps) are recorded (0: all), with the evaluations that follow them.
  int64_t steps = 0;
  // About 64 bytes each: 4M events are 256 MiB.
  int64_t max_events = 4'000'000;
};

class TraceRecorder {
 public:
  explicit TraceRecorder(TraceRecorderOptions options = {});
  TraceRecorder(const TraceRecorder&) = delete;
  TraceRecorder& operator=(const TraceRecorder&) = delete;

  // Nanoseconds since this recorder's epoch.
  int64_t NowNs() const;
  // The epoch on the monotonic (steady) clock, in nanoseconds: comparable between processes of
  // one machine.
  int64_t EpochNs() const;
  // Whether events of this step are recorded (an evaluation run after training step N-1 carries
  // step N and is recorded with step N-1).
  bool Records(int64_t step, bool eval) const;
  void Add(const TraceEvent& event);

  const std::vector<TraceEvent>& events() const { return events_; }
  int64_t dropped() const { return dropped_; }

  // Everything recorded from event `first` on, for the merge on rank 0 (and the progress records
  // of trace_parts.h).
  pb::RankTrace ToProto(int rank, int stage, int replica, size_t first = 0) const;

 private:
  TraceRecorderOptions options_;
  std::chrono::steady_clock::time_point epoch_;
  std::vector<TraceEvent> events_;
  int64_t dropped_ = 0;
};

// Records [construction, destruction) as one event, so a span also ends when its scope is left
// through an error. A null recorder, or a step not recorded, makes it a no-op.
class TraceSpan {
 public:
  TraceSpan(TraceRecorder* recorder, const TraceEvent& event);
  ~TraceSpan();
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  TraceRecorder* recorder_;
  TraceEvent event_;
};

// Reads back a RankTrace's events; unknown kinds are skipped (a newer writer).
std::vector<TraceEvent> EventsFromProto(const pb::RankTrace& trace);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_TRACE_TRACE_RECORDER_H_

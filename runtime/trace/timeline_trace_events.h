// The part of a gpipe trace JSON the timeline needs, as plain values: the run's facts from
// otherData, each rank's stage and replica (from its process_name "stage S, replica R", else
// from its spans' args.stage), and the complete ("X") spans of the "steps" and "compute"
// threads. Everything else in the file is skipped unread, and unknown fields are ignored, so
// newer writers stay readable. Internal to TimelineFromTrace; pure.
#ifndef GPIPE_RUNTIME_TRACE_TIMELINE_TRACE_EVENTS_H_
#define GPIPE_RUNTIME_TRACE_TIMELINE_TRACE_EVENTS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpipe::trace {

// The trace format this reader understands (otherData.format); newer ones are refused.
inline constexpr int64_t kTraceFormat = 1;

inline constexpr int kStepsThread = 0;
inline constexpr int kComputeThread = 1;

// One "X" span on the steps or compute thread; times in microseconds from the trace start.
struct TimelineSpan {
  int rank = 0;
  int thread = 0;
  double begin_us = 0;
  double end_us = 0;
  std::string category;  // "step", "eval", "forward", "backward", ...
  std::string name;      // "step 12", "F3", "F3.1", "load 3"
  // From args, or (step, micro-batch, chunk) from the name when args lack them.
  std::optional<int64_t> step;
  std::optional<int64_t> micro_batch;
  int64_t chunk = 0;
  bool eval = false;
};

struct RankPlace {
  int stage = 0;
  int replica = 0;
};

struct TraceContents {
  // otherData, as written (empty / 0 when absent).
  std::string plan, schedule, remat, device, status;
  int64_t stages = 0, micro_batches = 0, chunks = 1, ranks = 0;
  std::vector<int64_t> missing_ranks;
  double max_clock_uncertainty_us = 0;

  std::map<int, RankPlace> places;  // by rank, for every rank that has spans or a name
  std::vector<TimelineSpan> spans;  // in file order
};

// INVALID_ARGUMENT for text that is not a gpipe trace, a newer format, a malformed span
// ("traceEvents[12] (rank 1): 'dur' is missing or not a number") or a rank whose stage cannot
// be told.
absl::StatusOr<TraceContents> ReadTraceContents(absl::string_view json_text);

}  // namespace gpipe::trace

#endif  // GPIPE_RUNTIME_TRACE_TIMELINE_TRACE_EVENTS_H_

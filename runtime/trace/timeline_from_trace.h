// TimelineFromTrace: the Timeline of one training step of a real run, read from the Chrome /
// Perfetto trace JSON rank 0 writes (`runtime { trace: "trace.json" }`). The step's window runs
// from the earliest start to the latest end of its "step" spans over all ranks, so a rank that
// starts late or finishes early shows its wait as bubble; its boxes are the compute spans
// (tid 1) of that step, in milliseconds from the trace start (rank 0's clock). Event kinds the
// picture does not need (communication, transfers, flows, markers) and unknown fields are
// ignored, so the trace format can grow. Pure.
#ifndef GPIPE_RUNTIME_TRACE_TIMELINE_FROM_TRACE_H_
#define GPIPE_RUNTIME_TRACE_TIMELINE_FROM_TRACE_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/trace/timeline.h"

namespace gpipe::trace {

struct TraceTimelineOptions {
  // The training step to draw; by default the last one every rank completed.
  std::optional<int64_t> step;
  // kAuto: one row per stage, or one per rank when some stage has several replicas.
  enum class Rows { kAuto, kStage, kRank };
  Rows rows = Rows::kAuto;
};

// INVALID_ARGUMENT when the text is not a gpipe trace (not JSON, no traceEvents, another
// generator, a newer format), a span the picture needs is malformed (naming its index in
// traceEvents and its rank), a rank's stage cannot be told, or the step is not in the trace
// (naming the steps it holds).
absl::StatusOr<Timeline> TimelineFromTrace(absl::string_view json_text,
                                           const TraceTimelineOptions& options = {});

}  // namespace gpipe::trace

#endif  // GPIPE_RUNTIME_TRACE_TIMELINE_FROM_TRACE_H_

// Chrome/Perfetto trace JSON of a run: every rank's recorded events (pb::RankTrace) merged on
// rank 0's clock into one file that chrome://tracing and ui.perfetto.dev open.
//   - one process per rank, named "stage s, replica r"; one thread (track) per stream:
//     "steps", "compute", "comm" (receive waits, send posts, the gradient-sync barrier) and
//     "transfers" (async spans from a transfer's post to its completion, which may overlap);
//   - spans ("X") carry args {step, micro_batch, chunk, instruction, stage, eval};
//   - a flow arrow joins each send instruction to the receive instruction it fed;
//   - a global instant marks the start of every step on rank 0.
// otherData holds the run's facts (plan, schedule, K, M, chunks, status) and the clock
// alignment (offset and uncertainty per rank, ranks missing from a failed run). Times are in
// microseconds since the earliest event. Pure.
#ifndef GPIPE_RUNTIME_TRACE_CHROME_TRACE_H_
#define GPIPE_RUNTIME_TRACE_CHROME_TRACE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/control.pb.h"

namespace gpipe {

struct TraceRunInfo {
  std::string plan;
  std::string schedule;  // "GPIPE", ...
  std::string remat;
  std::string device;  // "CPU", "SIM"
  int stages = 1;
  int micro_batches = 1;
  int chunks = 1;
  int ranks = 1;
  std::string status = "ok";  // or the error the run failed with
};

// `ranks`: whatever arrived, in any order (a failed run may miss some; they are listed).
std::string FormatChromeTrace(const TraceRunInfo& info, const std::vector<pb::RankTrace>& ranks);

// Writes FormatChromeTrace's text to `path` atomically (a temporary file renamed into place).
absl::Status WriteChromeTrace(const std::string& path, const TraceRunInfo& info,
                              const std::vector<pb::RankTrace>& ranks);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_TRACE_CHROME_TRACE_H_

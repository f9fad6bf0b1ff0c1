// Trace parts: what the ranks of a traced run leave beside the trace file when the run cannot
// end with rank 0 gathering every rank's events over MPI.
//   <trace>.rank<R>.pb        rank R's whole record, written when it stops after a failure;
//   <trace>.rank<R>.steps.pb  rank R's events so far, appended at every step boundary (records
//                             of a 4-byte little-endian length and a pb::RankTrace with the
//                             events since the last record), so that a rank killed by a signal
//                             (a rank dying makes mpirun kill the others) still leaves its
//                             events up to its last completed step. Removed when the run ends.
// Rank 0 merges them after a failure; gpipe-run merges them when the job ended without rank 0
// writing the trace. Files only, no MPI.
#ifndef GPIPE_RUNTIME_TRACE_TRACE_PARTS_H_
#define GPIPE_RUNTIME_TRACE_TRACE_PARTS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/control.pb.h"
#include "proto/plan.pb.h"
#include "runtime/trace/chrome_trace.h"

namespace gpipe {

std::string TracePartPath(const std::string& trace, int rank);
std::string TraceProgressPath(const std::string& trace, int rank);

// Appends one record (`events`: the events since the last one, with the rank's fields).
absl::Status AppendTraceProgress(const std::string& path, const pb::RankTrace& events);
// Every whole record of the file merged into one RankTrace (a record cut short by a kill is left
// out). NOT_FOUND when the file is absent, DATA_LOSS when no record is readable.
absl::StatusOr<pb::RankTrace> ReadTraceProgress(const std::string& path);

// The run facts of a plan's trace (otherData), for `world_size` ranks.
TraceRunInfo TraceRunInfoOf(const pb::Plan& plan, int world_size);

// What the ranks left: per rank, its whole part, else its progress record.
struct TraceParts {
  std::vector<pb::RankTrace> ranks;
  std::vector<int> found;          // their ranks, ascending
  std::vector<std::string> files;  // the files read (to remove once merged)
};
// Ranks with `skip[r]` set (where skip is long enough) are not looked for.
TraceParts ReadTraceParts(const std::string& trace, int world_size,
                          const std::vector<bool>& skip = {});

// Removes rank `rank`'s part and progress files (absent ones are fine).
void RemoveTraceParts(const std::string& trace, int rank);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_TRACE_TRACE_PARTS_H_

// SalvageTrace: gpipe-run's part in runtime.trace. When a job ends without rank 0 writing the
// trace (a rank was killed, and mpirun then killed the others, rank 0 included, while they
// waited for it), gpipe-run merges what the ranks left beside the trace file (trace_parts.h:
// each rank's events up to its last step boundary) into the trace, as rank 0 would have.
// Only parts modified since the launch are this job's: a job that failed before any rank traced
// a step has no trace, whatever an earlier run left beside the same path. After a failed job the
// parts it left are removed, merged or not. (File times come from the kernel's coarse clock, a
// tick behind at most; the ranks write their parts long after the launch.)
#ifndef GPIPE_LAUNCHER_TRACE_SALVAGE_H_
#define GPIPE_LAUNCHER_TRACE_SALVAGE_H_

#include <filesystem>
#include <string>

#include "runtime/trace/chrome_trace.h"

namespace gpipe {

// `trace`: the job's trace path ("" when not traced); `info`: the run's facts (its `ranks`
// bounds the parts looked for); `exit_code`: the job's (0: nothing is done); `launched`: when
// the job started (a trace file at least as new is this job's, written by rank 0: then only the
// parts are removed). Returns the line to print, or "" when nothing was merged.
std::string SalvageTrace(const std::string& trace, TraceRunInfo info, int exit_code,
                         std::filesystem::file_time_type launched);

}  // namespace gpipe

#endif  // GPIPE_LAUNCHER_TRACE_SALVAGE_H_

#include "launcher/trace_salvage.h"

#include <cstdio>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/trace/trace_parts.h"

namespace gpipe {
namespace {

namespace fs = std::filesystem;

// Whether `path` exists and was modified at `launched` or later (this job's).
bool WrittenSince(const std::string& path, fs::file_time_type launched) {
  std::error_code error;
  const fs::file_time_type written = fs::last_write_time(path, error);
  return !error && written >= launched;
}

bool Exists(const std::string& path) {
  std::error_code error;
  return fs::exists(path, error) && !error;
}

// Removes the parts this job wrote (those of an earlier run are not this job's to remove).
void RemoveThisJobsParts(const std::string& trace, int ranks, fs::file_time_type launched) {
  for (int r = 0; r < ranks; ++r) {
    for (const std::string& file : {TracePartPath(trace, r), TraceProgressPath(trace, r)}) {
      if (WrittenSince(file, launched)) std::remove(file.c_str());
    }
  }
}

}  // namespace

std::string SalvageTrace(const std::string& trace, TraceRunInfo info, int exit_code,
                         fs::file_time_type launched) {
  // A job that finished: rank 0 wrote the trace and removed the parts.
  if (trace.empty() || exit_code == 0) return "";
  if (WrittenSince(trace, launched)) {
    // Rank 0 wrote it, but may have been killed before removing the parts.
    RemoveThisJobsParts(trace, info.ranks, launched);
    return "";
  }
  // Only parts written since the launch: a job that failed before the ranks traced anything
  // has no trace, whatever an earlier run left beside the same path. A rank whose whole part is
  // an earlier run's is left out (ReadTraceParts would prefer it to this job's progress).
  std::vector<bool> stale(static_cast<size_t>(info.ranks), false);
  for (int r = 0; r < info.ranks; ++r) {
    const std::string whole = TracePartPath(trace, r);
    stale[r] = Exists(whole) ? !WrittenSince(whole, launched)
                             : !WrittenSince(TraceProgressPath(trace, r), launched);
  }
  const TraceParts parts = ReadTraceParts(trace, info.ranks, stale);
  if (parts.found.empty()) {
    RemoveThisJobsParts(trace, info.ranks, launched);
    return "";
  }
  info.status = absl::StrCat("the job ended (exit code ", exit_code,
                             ") before rank 0 wrote the trace; gpipe-run merged the events the "
                             "ranks had saved up to their last step boundary");
  const absl::Status written = WriteChromeTrace(trace, info, parts.ranks);
  RemoveThisJobsParts(trace, info.ranks, launched);
  if (!written.ok()) return absl::StrCat("the trace was not written: ", written.message());
  return absl::StrCat("wrote the trace of the failed job to ", trace, " from what ranks ",
                      absl::StrJoin(parts.found, ", "), " of ", info.ranks,
                      " saved up to their last step boundary");
}

}  // namespace gpipe

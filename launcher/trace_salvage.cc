#include "launcher/trace_salvage.h"

#include <cstdio>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/trace/trace_parts.h"

namespace gpipe {

std::string SalvageTrace(const std::string& trace, TraceRunInfo info, int exit_code,
                         std::filesystem::file_time_type launched) {
  if (trace.empty()) return "";
  std::error_code error;
  if (std::filesystem::exists(trace, error) &&
      std::filesystem::last_write_time(trace, error) >= launched && !error) {
    return "";  // rank 0 wrote it
  }
  const TraceParts parts = ReadTraceParts(trace, info.ranks);
  if (parts.found.empty()) return "";
  info.status = absl::StrCat("the job ended (exit code ", exit_code,
                             ") before rank 0 wrote the trace; gpipe-run merged the events the "
                             "ranks had saved up to their last step boundary");
  if (absl::Status written = WriteChromeTrace(trace, info, parts.ranks); !written.ok()) {
    return absl::StrCat("the trace was not written: ", written.message());
  }
  for (const std::string& file : parts.files) std::remove(file.c_str());
  return absl::StrCat("wrote the trace of the failed job to ", trace, " from what ranks ",
                      absl::StrJoin(parts.found, ", "), " of ", info.ranks,
                      " saved up to their last step boundary");
}

}  // namespace gpipe

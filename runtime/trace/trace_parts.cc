#include "runtime/trace/trace_parts.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "runtime/core/file_io.h"

namespace gpipe {

std::string TracePartPath(const std::string& trace, int rank) {
  return absl::StrCat(trace, ".rank", rank, ".pb");
}

std::string TraceProgressPath(const std::string& trace, int rank) {
  return absl::StrCat(trace, ".rank", rank, ".steps.pb");
}

absl::Status AppendTraceProgress(const std::string& path, const pb::RankTrace& events) {
  const std::string body = events.SerializeAsString();
  const uint32_t size = static_cast<uint32_t>(body.size());
  std::string record(4, '\0');
  for (int i = 0; i < 4; ++i) record[i] = static_cast<char>((size >> (8 * i)) & 0xff);
  record += body;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat(path, ": ", std::strerror(errno)));
  // One write: a kill leaves a whole record or a short last one, which the reader drops.
  const ssize_t written = ::write(fd, record.data(), record.size());
  const int error = errno;
  ::close(fd);
  if (written != static_cast<ssize_t>(record.size())) {
    return absl::InternalError(
        absl::StrCat(path, ": ", written < 0 ? std::strerror(error) : "short write"));
  }
  return absl::OkStatus();
}

absl::StatusOr<pb::RankTrace> ReadTraceProgress(const std::string& path) {
  std::error_code exists_error;
  if (!std::filesystem::exists(path, exists_error)) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  }
  absl::StatusOr<std::string> bytes = ReadWholeFile(path);
  if (!bytes.ok()) return bytes.status();
  pb::RankTrace merged;
  size_t at = 0;
  int records = 0;
  while (at + 4 <= bytes->size()) {
    uint32_t size = 0;
    for (int i = 0; i < 4; ++i) {
      size |= static_cast<uint32_t>(static_cast<unsigned char>((*bytes)[at + i])) << (8 * i);
    }
    if (at + 4 + size > bytes->size()) break;
    pb::RankTrace record;
    if (!record.ParseFromArray(bytes->data() + at + 4, static_cast<int>(size))) break;
    merged.MergeFrom(record);  // events append; the rank's fields are the same in every record
    at += 4 + size;
    ++records;
  }
  if (records == 0) return absl::DataLossError(absl::StrCat(path, ": no whole record"));
  return merged;
}

TraceRunInfo TraceRunInfoOf(const pb::Plan& plan, int world_size) {
  TraceRunInfo info;
  info.plan = plan.name();
  info.schedule = pb::Schedule_Name(plan.pipeline().schedule());
  info.remat = pb::Remat_Name(plan.pipeline().remat());
  info.device = pb::Device_Name(plan.runtime().device());
  info.stages = plan.pipeline().stages();
  info.micro_batches = plan.pipeline().micro_batches();
  info.chunks = plan.pipeline().virtual_stages();
  info.ranks = world_size;
  return info;
}

TraceParts ReadTraceParts(const std::string& trace, int world_size, const std::vector<bool>& skip) {
  TraceParts parts;
  for (int r = 0; r < world_size; ++r) {
    if (r < static_cast<int>(skip.size()) && skip[r]) continue;
    pb::RankTrace part;
    if (absl::StatusOr<std::string> bytes = ReadWholeFile(TracePartPath(trace, r));
        bytes.ok() && part.ParseFromString(*bytes)) {
      parts.files.push_back(TracePartPath(trace, r));
    } else if (absl::StatusOr<pb::RankTrace> progress =
                   ReadTraceProgress(TraceProgressPath(trace, r));
               progress.ok()) {
      part = *std::move(progress);
      if (part.error().empty()) {
        part.set_error("the rank ended without a word; its events up to its last step boundary");
      }
    } else {
      continue;
    }
    parts.files.push_back(TraceProgressPath(trace, r));
    parts.ranks.push_back(std::move(part));
    parts.found.push_back(r);
  }
  return parts;
}

void RemoveTraceParts(const std::string& trace, int rank) {
  std::remove(TracePartPath(trace, rank).c_str());
  std::remove(TraceProgressPath(trace, rank).c_str());
}

}  // namespace gpipe

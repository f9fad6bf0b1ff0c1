// MetricsWriter: appends one JSON object per line (JSON Lines) to a metrics file, flushing each
// line so a crashed or killed run keeps every step it finished. Opening truncates the file, or
// appends to it (a resumed run continues its metrics).
// Not thread-safe (rank 0's coordinator is its only user).
#ifndef GPIPE_RUNTIME_TRAIN_METRICS_WRITER_H_
#define GPIPE_RUNTIME_TRAIN_METRICS_WRITER_H_

#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/core/json.h"

namespace gpipe {

class MetricsWriter {
 public:
  // Creates or truncates `path` (with `append`: appends to it). NOT_FOUND (naming the path) when it
  // cannot be opened.
  static absl::StatusOr<std::unique_ptr<MetricsWriter>> Open(const std::string& path,
                                                             bool append = false);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  // Writes `record` as one line and flushes it. DATA_LOSS naming the path on a write error.
  absl::Status Write(const Json& record);
  const std::string& path() const { return path_; }

 private:
  MetricsWriter(std::string path, std::FILE* file) : path_(std::move(path)), file_(file) {}

  std::string path_;
  std::FILE* file_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_TRAIN_METRICS_WRITER_H_

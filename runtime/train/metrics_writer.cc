#include "runtime/train/metrics_writer.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace gpipe {

absl::StatusOr<std::unique_ptr<MetricsWriter>> MetricsWriter::Open(const std::string& path,
                                                                   bool append) {
  std::FILE* file = std::fopen(path.c_str(), append ? "a" : "w");
  if (file == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("cannot open metrics file ", path, " for writing: ", std::strerror(errno),
                     "; check that its directory exists and is writable (runtime.metrics_out or "
                     "--metrics-out)"));
  }
  return std::unique_ptr<MetricsWriter>(new MetricsWriter(path, file));
}

MetricsWriter::~MetricsWriter() { std::fclose(file_); }

absl::Status MetricsWriter::Write(const Json& record) {
  const std::string line = DumpJson(record) + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    return absl::DataLossError(
        absl::StrCat("writing metrics file ", path_, " failed: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace gpipe

// Logger: writes whole lines with a rank prefix ("[gpipe r2] ...") to a stream.
// One per process, owned by whoever runs the process (launcher/coord); passed by reference.
// Each line is written with a single write so lines from different ranks do not interleave.
#ifndef GPIPE_RUNTIME_CORE_LOGGER_H_
#define GPIPE_RUNTIME_CORE_LOGGER_H_

#include <cstdio>
#include <string>

#include "absl/strings/string_view.h"

namespace gpipe {

class Logger {
 public:
  // `rank` < 0 means "no rank" (tools outside a job).
  explicit Logger(int rank, std::FILE* out = stderr);

  void Info(absl::string_view message) const;
  void Warning(absl::string_view message) const;
  void Error(absl::string_view message) const;
  const std::string& prefix() const { return prefix_; }

 private:
  void Write(absl::string_view level, absl::string_view message) const;
  std::string prefix_;
  std::FILE* out_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CORE_LOGGER_H_

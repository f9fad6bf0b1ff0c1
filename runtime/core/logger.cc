#include "runtime/core/logger.h"

#include "absl/strings/str_cat.h"

namespace gpipe {

Logger::Logger(int rank, std::FILE* out)
    : prefix_(rank >= 0 ? absl::StrCat("[gpipe r", rank, "] ") : "[gpipe] "), out_(out) {}

void Logger::Info(absl::string_view message) const { Write("", message); }
void Logger::Warning(absl::string_view message) const { Write("warning: ", message); }
void Logger::Error(absl::string_view message) const { Write("error: ", message); }

void Logger::Write(absl::string_view level, absl::string_view message) const {
  const std::string line = absl::StrCat(prefix_, level, message, "\n");
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fflush(out_);
}

}  // namespace gpipe

#include "runtime/core/logger.h"

#include "absl/strings/str_cat.h"

namespace gpipe {

Logger::Logger(int rank, std::FILE* out)
    : prefix_(rank >= 0 ? absl::StrCat("[gpipe r", rank, "] ") : "[gpipe] "), out_(out) {}

void Logger::Info(std::string_view message) const { Write("", message); }
void Logger::Warning(std::string_view message) const { Write("warning: ", message); }
void Logger::Error(std::string_view message) const { Write("error: ", message); }

void Logger::Write(std::string_view level, std::string_view message) const {
  std::string line = prefix_;
  line.append(level).append(message).append("\n");
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fflush(out_);
}

}  // namespace gpipe

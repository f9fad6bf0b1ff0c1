#include "launcher/flags.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/setting_limits.h"

namespace gpipe {

std::optional<std::string> ParsedFlags::Get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> ParsedFlags::GetAll(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

absl::StatusOr<ParsedFlags> ParseFlags(const std::vector<FlagSpec>& specs,
                                       const std::vector<std::string>& args) {
  ParsedFlags parsed;
  bool flags_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (flags_done || arg.size() < 2 || arg[0] != '-') {
      parsed.positional_.push_back(arg);
      continue;
    }
    if (arg == "--") {
      flags_done = true;
      continue;
    }
    std::string body = arg.substr(arg[1] == '-' ? 2 : 1);
    std::optional<std::string> inline_value;
    if (const size_t eq = body.find('='); eq != std::string::npos) {
      inline_value = body.substr(eq + 1);
      body = body.substr(0, eq);
    }
    const FlagSpec* spec = nullptr;
    for (const FlagSpec& s : specs) {
      if (s.name == body) spec = &s;
    }
    if (spec == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", arg, " (see --help)"));
    }
    if (!spec->repeatable && parsed.values_.contains(spec->name)) {
      return absl::InvalidArgumentError(absl::StrCat("flag --", spec->name, " given twice"));
    }
    std::string value;
    if (spec->takes_value) {
      if (inline_value) {
        value = *inline_value;
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrCat("flag --", spec->name, " needs a value"));
      }
    } else if (inline_value) {
      return absl::InvalidArgumentError(absl::StrCat("flag --", spec->name, " takes no value"));
    }
    parsed.values_[spec->name].push_back(value);
  }
  return parsed;
}

absl::StatusOr<int64_t> ParseIntFlag(const std::string& flag, const std::string& value) {
  int64_t out = 0;
  if (!absl::SimpleAtoi(value, &out)) {
    return absl::InvalidArgumentError(
        absl::StrCat("flag ", flag, " needs a whole number, got '", value, "'"));
  }
  return out;
}

absl::StatusOr<double> ParseDoubleFlag(const std::string& flag, const std::string& value) {
  double out = 0;
  if (!absl::SimpleAtod(value, &out)) {
    return absl::InvalidArgumentError(
        absl::StrCat("flag ", flag, " needs a number, got '", value, "'"));
  }
  return out;
}

absl::StatusOr<double> ParseSecondsFlag(const std::string& flag, const std::string& value) {
  double seconds = 0;
  if (!absl::SimpleAtod(value, &seconds) || !(seconds > 0 && seconds <= kMaxWaitSeconds)) {
    return absl::InvalidArgumentError(
        absl::StrCat("flag ", flag, " needs a number of seconds > 0 and <= ",
                     static_cast<int64_t>(kMaxWaitSeconds), ", got '", value, "'"));
  }
  return seconds;
}

absl::StatusOr<int64_t> ParseByteCountFlag(const std::string& flag, const std::string& value) {
  int64_t bytes = 0;
  // SimpleAtoi refuses values beyond int64 as it refuses text: both are out of the range.
  if (!absl::SimpleAtoi(value, &bytes) || bytes < 1 || bytes > kMaxByteCount) {
    return absl::InvalidArgumentError(absl::StrCat("flag ", flag,
                                                   " needs a whole number of bytes from 1 to ",
                                                   kMaxByteCount, " (1 EiB), got '", value, "'"));
  }
  return bytes;
}

absl::StatusOr<int> ParseProcessCountFlag(const std::string& flag, const std::string& value) {
  int64_t count = 0;
  if (!absl::SimpleAtoi(value, &count) || count < 1 || count > kMaxProcessCount) {
    return absl::InvalidArgumentError(absl::StrCat("flag ", flag,
                                                   " needs a whole number of processes from 1 to ",
                                                   kMaxProcessCount, ", got '", value, "'"));
  }
  return static_cast<int>(count);
}

}  // namespace gpipe

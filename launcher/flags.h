// A small command-line parser for the gpipe programs: `--name value` or `--name=value`,
// repeatable flags collected in order, positional arguments kept in order, `--` ends flags.
// Only launcher/ reads flags and environment variables; it fills option structs for the rest.
#ifndef GPIPE_LAUNCHER_FLAGS_H_
#define GPIPE_LAUNCHER_FLAGS_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gpipe {

struct FlagSpec {
  std::string name;         // without dashes: "plan", "n"
  bool takes_value = true;  // false: a switch such as --help
  bool repeatable = false;
};

class ParsedFlags {
 public:
  bool Has(const std::string& name) const { return values_.contains(name); }
  // The last value given, or nullopt.
  std::optional<std::string> Get(const std::string& name) const;
  // Every value given, in order.
  std::vector<std::string> GetAll(const std::string& name) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  friend absl::StatusOr<ParsedFlags> ParseFlags(const std::vector<FlagSpec>&,
                                                const std::vector<std::string>&);
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
};

// Parses `args` (without the program name). Unknown flags, a missing value or a non-repeatable
// flag given twice are INVALID_ARGUMENT naming the flag. "-n" style single-dash names work too.
absl::StatusOr<ParsedFlags> ParseFlags(const std::vector<FlagSpec>& specs,
                                       const std::vector<std::string>& args);

// Parses a whole decimal number; INVALID_ARGUMENT naming `flag` otherwise.
absl::StatusOr<int64_t> ParseIntFlag(const std::string& flag, const std::string& value);
absl::StatusOr<double> ParseDoubleFlag(const std::string& flag, const std::string& value);
// A number of seconds > 0 and at most kMaxWaitSeconds (runtime/core/setting_limits.h): every
// wait needs a real deadline, and one that the clocks can hold. The error names the flag and
// the range.
absl::StatusOr<double> ParseSecondsFlag(const std::string& flag, const std::string& value);
// A whole number of bytes from 1 to kMaxByteCount (runtime/core/setting_limits.h); the error
// names the flag and the range.
absl::StatusOr<int64_t> ParseByteCountFlag(const std::string& flag, const std::string& value);
// A number of processes from 1 to kMaxProcessCount (so that it fits an int everywhere it goes:
// the plan's world-size check, the launcher's -np); the error names the flag and the range.
inline constexpr int kMaxProcessCount = 1 << 20;
absl::StatusOr<int> ParseProcessCountFlag(const std::string& flag, const std::string& value);

}  // namespace gpipe

#endif  // GPIPE_LAUNCHER_FLAGS_H_

// Environment: a snapshot of environment variables as a plain map. Only launcher/ reads the
// process environment; the decisions that depend on it take an Environment parameter, so tests
// pass a map instead of changing the process-wide environment.
#ifndef GPIPE_LAUNCHER_ENVIRONMENT_H_
#define GPIPE_LAUNCHER_ENVIRONMENT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace gpipe {

using Environment = std::map<std::string, std::string>;

// Every variable of this process now (from `environ`).
Environment ProcessEnvironment();

// The variable's value, or nullopt when it is not set.
std::optional<std::string> Lookup(const Environment& env, const std::string& name);
// The variable as a whole decimal number; nullopt when unset, empty or not a number (a launcher
// variable that cannot be read is treated as absent rather than guessed at).
std::optional<int64_t> LookupInt(const Environment& env, const std::string& name);

}  // namespace gpipe

#endif  // GPIPE_LAUNCHER_ENVIRONMENT_H_

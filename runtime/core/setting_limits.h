// The largest wait and byte count a setting may hold: one bound for the programs' flags
// (launcher/flags.cc) and the plan's fields (runtime/plan/runtime_checks.cc), so that neither
// accepts a value the code cannot represent.
//
// A wait becomes a deadline, now + the wait, and the start-up watchdog's deadline is a
// std::chrono time in int64 nanoseconds: about 292 years past the clock's epoch at most, so a
// wait of 1e10 s wraps to a deadline already past and ended every job at once. 1e6 s (11.6
// days) is far beyond any useful wait and far inside every representation. Byte counts stop at
// 2^60 (1 EiB), so that the sums of a few of them (stage totals set against a limit) stay inside
// int64.
#ifndef GPIPE_RUNTIME_CORE_SETTING_LIMITS_H_
#define GPIPE_RUNTIME_CORE_SETTING_LIMITS_H_

#include <cstdint>

namespace gpipe {

inline constexpr double kMaxWaitSeconds = 1e6;
inline constexpr int64_t kMaxByteCount = int64_t{1} << 60;

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CORE_SETTING_LIMITS_H_

#include "runtime/comm/clock.h"

#include "absl/time/clock.h"

namespace gpipe {

absl::Time RealClock::Now() const { return absl::Now(); }

void RealClock::SleepFor(absl::Duration duration) const { absl::SleepFor(duration); }

}  // namespace gpipe

// Clock: the time source and sleeper behind every communication wait, so tests can replace
// real time with a fake one and check deadline logic without waiting.
// Implementations must be thread-safe; RealClock is (it has no state).
#ifndef GPIPE_RUNTIME_COMM_CLOCK_H_
#define GPIPE_RUNTIME_COMM_CLOCK_H_

#include "absl/time/time.h"

namespace gpipe {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
  // Gives the CPU away for about `duration` (processes share cores; waits must not spin hot).
  virtual void SleepFor(absl::Duration duration) const = 0;
};

// Wall-clock time and a real sleep.
class RealClock final : public Clock {
 public:
  absl::Time Now() const override;
  void SleepFor(absl::Duration duration) const override;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COMM_CLOCK_H_

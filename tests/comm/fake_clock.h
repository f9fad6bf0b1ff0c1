// FakeClock: a Clock whose time moves only when something sleeps on it (or a test advances it),
// recording every sleep. Lets deadline logic be tested exactly and instantly. Not thread-safe.
#ifndef GPIPE_TESTS_COMM_FAKE_CLOCK_H_
#define GPIPE_TESTS_COMM_FAKE_CLOCK_H_

#include <vector>

#include "absl/time/time.h"
#include "runtime/comm/clock.h"

namespace gpipe {

class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'000'000)) : now_(start) {}

  absl::Time Now() const override { return now_; }
  void SleepFor(absl::Duration duration) const override {
    sleeps_.push_back(duration);
    now_ += duration + oversleep_;
  }
  void Advance(absl::Duration duration) { now_ += duration; }
  // Every sleep lasts this much longer than asked, like a wake-up on a loaded machine.
  void set_oversleep(absl::Duration oversleep) { oversleep_ = oversleep; }
  const std::vector<absl::Duration>& sleeps() const { return sleeps_; }

 private:
  mutable absl::Time now_;
  mutable std::vector<absl::Duration> sleeps_;
  absl::Duration oversleep_;
};

}  // namespace gpipe

#endif  // GPIPE_TESTS_COMM_FAKE_CLOCK_H_

#include "launcher/startup_watchdog.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace gpipe {

StartupWatchdog::StartupWatchdog(std::string what, absl::Duration limit) {
  const auto wait = std::chrono::milliseconds(absl::ToInt64Milliseconds(limit));
  thread_ = std::thread([this, what = std::move(what), wait, limit] {
    std::unique_lock<std::mutex> lock(mutex_);
    if (disarmed_.wait_for(lock, wait, [this] { return done_; })) return;
    std::fprintf(stderr,
                 "gpipe-worker: %s did not complete within %s (a rank of the job never started "
                 "or is not responding); exiting\n",
                 what.c_str(), absl::FormatDuration(limit).c_str());
    std::fflush(stderr);
    ::_exit(1);
  });
}

void StartupWatchdog::Disarm() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  disarmed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace gpipe

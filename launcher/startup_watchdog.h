// StartupWatchdog: a deadline for what runs before gpipe's own deadlines exist. MPI_Init waits
// for every rank of the job without a time limit, so a rank that never starts or hangs while
// starting (a frozen node, SIGSTOP) would hold every other rank there forever. While armed, a
// helper thread ends the process with exit code 1 and a line on stderr once `limit` passes;
// Disarm (or destruction) stops it. The launcher then ends the job (mpirun and srun end every
// rank when one exits non-zero).
#ifndef GPIPE_LAUNCHER_STARTUP_WATCHDOG_H_
#define GPIPE_LAUNCHER_STARTUP_WATCHDOG_H_

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "absl/time/time.h"

namespace gpipe {

class StartupWatchdog {
 public:
  // `what` names the guarded work in the message ("MPI start-up").
  StartupWatchdog(std::string what, absl::Duration limit);
  ~StartupWatchdog() { Disarm(); }
  StartupWatchdog(const StartupWatchdog&) = delete;
  StartupWatchdog& operator=(const StartupWatchdog&) = delete;

  void Disarm();

 private:
  std::mutex mutex_;
  std::condition_variable disarmed_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace gpipe

#endif  // GPIPE_LAUNCHER_STARTUP_WATCHDOG_H_

// LauncherOutput: how gpipe-run passes on what its launcher (mpirun, srun) writes. The launcher's
// stdout and stderr come through pipes and gpipe-run writes them to its own stdout and stderr
// (stderr through a LauncherReportFilter when asked: mpirun without --verbose). When one of
// gpipe-run's is gone (`gpipe-run ... 2>&1 | head -1`; gpipe-run ignores SIGPIPE), gpipe-run
// goes on reading and dropping what would go there (after a note on stderr when stdout went),
// so the job runs on and no launcher ever writes to a closed pipe (Open MPI's mpirun crashes
// with SIGSEGV there). Each Pump reads a bounded amount, so a fast launcher cannot keep the
// wait loop from its other work. While gpipe-run's stdout or stderr takes nothing (a paused
// reader, a terminal stopped by Ctrl-S) the writing waits, running the while_blocked callback
// (the wait loop's stop forwarding) every 20 ms; the launcher is not reaped meanwhile, and its
// own writes block once its pipe is full, which stalls the job until the reader goes on.
// Single-threaded: gpipe-run's wait loop pumps it.
#ifndef GPIPE_LAUNCHER_LAUNCHER_OUTPUT_H_
#define GPIPE_LAUNCHER_LAUNCHER_OUTPUT_H_

#include <functional>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "launcher/launcher_report_filter.h"

namespace gpipe {

class LauncherOutput {
 public:
  // The pipes; `filter_stderr`: the launcher's stderr through a LauncherReportFilter.
  static absl::StatusOr<LauncherOutput> Open(bool filter_stderr);
  LauncherOutput(LauncherOutput&& other) noexcept;
  LauncherOutput& operator=(LauncherOutput&&) = delete;
  LauncherOutput(const LauncherOutput&) = delete;
  LauncherOutput& operator=(const LauncherOutput&) = delete;
  ~LauncherOutput();

  // In the launcher's process, before exec: its stdout and stderr become the pipes.
  void AttachChild() const;
  // In gpipe-run, after the fork: only the launcher holds the writing ends.
  void DetachParent();
  // Passes on what arrives within `wait_ms` (0: what is there now). False once both pipes are
  // at end of file (then the caller waits with a sleep of its own).
  bool Pump(int wait_ms);
  // After the launcher ended: what it still wrote (for at most a second, in case a process it
  // started keeps a pipe open), then the filter's remainder.
  void Drain();
  // Run every 20 ms while writing waits for a reader that takes nothing.
  void set_while_blocked(std::function<void()> callback) { while_blocked_ = std::move(callback); }
  // gpipe-run's stdout was found closed.
  bool stdout_gone() const { return stdout_gone_; }

 private:
  struct Pipe {
    int read = -1;
    int write = -1;
  };
  LauncherOutput(Pipe out, Pipe err, bool filter_stderr)
      : out_(out), err_(err), filter_stderr_(filter_stderr) {}
  // Reads what `pipe` holds now; false at its end (then closed).
  bool ReadAvailable(Pipe& pipe, bool is_stdout);
  void PassOnStdout(std::string_view text);
  void PassOnStderr(std::string_view text);

  Pipe out_;
  Pipe err_;
  bool filter_stderr_;
  LauncherReportFilter filter_;
  bool stdout_gone_ = false;
  bool stderr_gone_ = false;
  std::function<void()> while_blocked_;
};

}  // namespace gpipe

#endif  // GPIPE_LAUNCHER_LAUNCHER_OUTPUT_H_

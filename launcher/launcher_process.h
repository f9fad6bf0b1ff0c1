// RunLauncher: gpipe-run's run of its launcher (mpirun, srun). The launcher runs in its own
// process group (the terminal's Ctrl-C reaches only gpipe-run) and gets SIGTERM when gpipe-run
// dies, however it dies. Its output passes through a LauncherOutput. The first stop signal
// gpipe-run records (StopSignals) is passed on to the launcher as SIGUSR1, which mpirun and srun
// forward to every rank — once the launcher and the ranks it started on this machine have
// installed their SIGUSR1 handlers (before that the signal would kill them), or kForwardWait
// after the request in any case (ranks on other machines cannot be seen).
#ifndef GPIPE_LAUNCHER_LAUNCHER_PROCESS_H_
#define GPIPE_LAUNCHER_LAUNCHER_PROCESS_H_

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "launcher/launcher_output.h"
#include "launcher/stop_signals.h"

namespace gpipe {

inline constexpr std::chrono::seconds kForwardWait{5};

// Runs `command` (its first word an executable path) and waits for it. Returns its exit code,
// 128 + N when a signal N killed it, 127 when it could not be executed. `output`: null leaves
// the launcher gpipe-run's own stdout and stderr.
int RunLauncher(const std::vector<std::string>& command, const StopSignals& signals,
                LauncherOutput* output);

// Whether process `pid` has a handler installed for `signo` (/proc/PID/status SigCgt). True when
// that cannot be read (the signal is then sent regardless).
bool CatchesSignal(pid_t pid, int signo);

}  // namespace gpipe

#endif  // GPIPE_LAUNCHER_LAUNCHER_PROCESS_H_

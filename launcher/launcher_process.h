// RunLauncher: gpipe-run's run of its launcher (mpirun, srun). The launcher runs in its own
// process group (the terminal's Ctrl-C reaches only gpipe-run) and gets SIGTERM when gpipe-run
// dies, however it dies. Its output passes through a LauncherOutput. The first stop signal
// gpipe-run records (StopSignals) is passed on to the launcher as SIGUSR1, which mpirun and srun
// forward to every rank. A rank that has not installed its handler yet (forked and not yet
// exec'd, or still loading) would die of it, so the signal goes:
//  - at once, when every rank runs on this machine (LocalRanks::all_local set: mpirun without
//    --launcher-arg, outside a Slurm allocation) and the launcher and exactly that many
//    gpipe-worker processes under it catch SIGUSR1 (/proc);
//  - otherwise kForwardWait after the request: ranks on other machines cannot be seen, and under
//    srun the ranks are slurmstepd's children, not the launcher's, so none is ever seen.
#ifndef GPIPE_LAUNCHER_LAUNCHER_PROCESS_H_
#define GPIPE_LAUNCHER_LAUNCHER_PROCESS_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "launcher/launcher_output.h"
#include "launcher/stop_signals.h"

namespace gpipe {

inline constexpr std::chrono::seconds kForwardWait{5};

// What gpipe-run knows of where the launcher starts the ranks.
struct LocalRanks {
  // The number of ranks when every one of them runs on this machine as the launcher's
  // descendant; nullopt when some may not (a hostfile, srun, a Slurm allocation).
  std::optional<int64_t> all_local;
};

// Runs `command` (its first word an executable path) and waits for it. Returns its exit code,
// 128 + N when a signal N killed it, 127 when it could not be executed. `output`: null leaves
// the launcher gpipe-run's own stdout and stderr.
int RunLauncher(const std::vector<std::string>& command, const StopSignals& signals,
                LocalRanks ranks, LauncherOutput* output);

// Whether process `pid` has a handler installed for `signo` (/proc/PID/status SigCgt). True when
// that cannot be read (the signal is then sent regardless).
bool CatchesSignal(pid_t pid, int signo);

}  // namespace gpipe

#endif  // GPIPE_LAUNCHER_LAUNCHER_PROCESS_H_

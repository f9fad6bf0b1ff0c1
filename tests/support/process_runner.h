// RunProcess: runs a command (argv, no shell) with a hard time limit, capturing stdout and
// stderr together. The child gets its own process group, and the whole group is killed when
// the limit passes, so an mpirun job cannot outlive a test.
#ifndef GPIPE_TESTS_SUPPORT_PROCESS_RUNNER_H_
#define GPIPE_TESTS_SUPPORT_PROCESS_RUNNER_H_

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace gpipe::testing {

struct ProcessResult {
  int exit_code = -1;      // the exit status, or 128 + signal when killed by a signal
  bool timed_out = false;  // killed because the limit passed
  double seconds = 0.0;    // wall time
  std::string output;      // stdout and stderr interleaved
};

// Called about every 50 ms while the process runs, with its pid (also its process group) and
// the output so far: a test sends it signals from here.
using ProcessWatcher = std::function<void(pid_t pid, const std::string& output)>;

ProcessResult RunProcess(const std::vector<std::string>& argv, double timeout_seconds,
                         const ProcessWatcher& watch = nullptr);

// The mpirun command line tests use for `np` ranks: GPIPE_MPIRUN_FLAGS from the environment
// (ctest sets it from the CMake option), by default oversubscribed, unbound, shared memory.
std::vector<std::string> MpirunPrefix(int np);

// $GPIPE_BIN_DIR/<name> (set by ctest), or the build's bin/ directory relative to the test.
std::string BinPath(const std::string& name);
// $GPIPE_SOURCE_DIR/<relative>.
std::string SourcePath(const std::string& relative);

}  // namespace gpipe::testing

#endif  // GPIPE_TESTS_SUPPORT_PROCESS_RUNNER_H_

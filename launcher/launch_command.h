// BuildLaunchCommand: how gpipe-run starts a job. It picks the launcher (mpirun, or srun inside
// a Slurm allocation unless --launcher says otherwise), checks the allocation against the
// plan's process count before anything starts, and returns the launcher's full argv with the
// notes gpipe-run prints on stderr (which launcher and why). Pure: the environment is a
// parameter, nothing is read or started here.
#ifndef GPIPE_LAUNCHER_LAUNCH_COMMAND_H_
#define GPIPE_LAUNCHER_LAUNCH_COMMAND_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "launcher/environment.h"

namespace gpipe {

struct LaunchRequest {
  int64_t processes = 0;  // ranks to start: pipeline.stages x pipeline.data_parallel, or -n
  // Where `processes` came from, for messages: "pipeline.stages 4 x pipeline.data_parallel 2".
  std::string processes_origin;
  std::string launcher;                    // --launcher: "mpirun", "srun", or empty to choose
  std::vector<std::string> launcher_args;  // --launcher-arg values, in order
  std::vector<std::string> worker_argv;    // gpipe-worker's path and its flags
  bool as_root = false;                    // mpirun refuses root without --allow-run-as-root
  int64_t local_cpus = 0;                  // this machine's cores (mpirun oversubscribes past it)
};

struct LaunchCommand {
  std::string launcher;            // "mpirun" or "srun"
  std::vector<std::string> argv;   // the launcher and everything after it
  std::vector<std::string> notes;  // lines for stderr, without the "gpipe-run: " prefix
};

// INVALID_ARGUMENT for an unknown launcher; FAILED_PRECONDITION, naming the numbers and the fix,
// when the Slurm allocation has fewer tasks than `processes` or gpipe-run is itself one of
// several srun tasks (each would launch the whole job).
absl::StatusOr<LaunchCommand> BuildLaunchCommand(const LaunchRequest& request,
                                                 const Environment& env);

}  // namespace gpipe

#endif  // GPIPE_LAUNCHER_LAUNCH_COMMAND_H_

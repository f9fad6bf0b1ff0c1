#include "launcher/launch_command.h"

#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gpipe {
namespace {

// mpirun options that name the hosts: with one, the hosts' slots decide where ranks go, not
// this machine's core count.
bool NamesHosts(const std::vector<std::string>& launcher_args) {
  for (const std::string& arg : launcher_args) {
    for (const char* option : {"--hostfile", "-hostfile", "--machinefile", "-machinefile",
                               "--default-hostfile", "--host", "-host", "-H"}) {
      if (arg == option || absl::StartsWith(arg, absl::StrCat(option, "="))) return true;
    }
  }
  return false;
}

std::string Origin(const LaunchRequest& request) {
  return request.processes_origin.empty() ? "" : absl::StrCat(" (", request.processes_origin, ")");
}

// srun inside an allocation: the allocation must hold `processes` tasks. SLURM_NTASKS (or its
// older name SLURM_NPROCS) is the allocation's task count in a batch script or salloc shell;
// inside a job step (srun sets SLURM_STEP_NUM_TASKS for its tasks, sbatch and salloc do not) it
// is the step's count instead, so it is not checked there.
absl::Status CheckSlurmTasks(const LaunchRequest& request, const Environment& env,
                             const std::string& job, std::vector<std::string>& notes) {
  if (Lookup(env, "SLURM_STEP_NUM_TASKS").has_value()) {
    notes.push_back(absl::StrCat(
        "gpipe-run runs inside step ", Lookup(env, "SLURM_STEP_ID").value_or("?"), " of Slurm job ",
        job,
        " (an `srun --pty` shell?), where SLURM_NTASKS counts that step, so the allocation's "
        "size is not checked; if srun waits with 'Requested nodes are busy', that step holds "
        "the resources: use salloc's shell or sbatch, or add --launcher-arg --overlap"));
    return absl::OkStatus();
  }
  std::string variable = "SLURM_NTASKS";
  std::optional<int64_t> tasks = LookupInt(env, variable);
  if (!tasks.has_value()) {
    variable = "SLURM_NPROCS";
    tasks = LookupInt(env, variable);
  }
  if (!tasks.has_value()) {
    notes.push_back(absl::StrCat("Slurm job ", job,
                                 " sets no task count (SLURM_NTASKS): srun checks that its ",
                                 request.processes, " tasks fit the allocation"));
    return absl::OkStatus();
  }
  if (*tasks < request.processes) {
    return absl::FailedPreconditionError(
        absl::StrCat("Slurm job ", job, " has ", *tasks, " tasks (", variable, "=", *tasks,
                     ") but the plan needs ", request.processes, " processes", Origin(request),
                     ": submit it with `#SBATCH --ntasks=", request.processes,
                     "` (or --nodes and --ntasks-per-node that multiply to ", request.processes,
                     "), or start the shell with `salloc --ntasks=", request.processes, "`"));
  }
  if (*tasks > request.processes) {
    notes.push_back(absl::StrCat("Slurm job ", job, " has ", *tasks, " tasks (", variable,
                                 "); this job uses ", request.processes, " of them (srun --ntasks ",
                                 request.processes, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LaunchCommand> BuildLaunchCommand(const LaunchRequest& request,
                                                 const Environment& env) {
  LaunchCommand command;
  // `srun -n 4 gpipe-run PLAN` would start four launchers, each launching the whole job.
  if (std::optional<int64_t> step_tasks = LookupInt(env, "SLURM_STEP_NUM_TASKS");
      step_tasks.has_value() && *step_tasks > 1 && Lookup(env, "SLURM_PROCID").has_value()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "gpipe-run is itself one of ", *step_tasks,
        " tasks that srun started (SLURM_STEP_NUM_TASKS=", *step_tasks, ", this is task ",
        Lookup(env, "SLURM_PROCID").value_or("?"),
        "), so each would launch the whole job: run gpipe-run once, in the batch script or the "
        "salloc shell, and it starts the ",
        request.processes,
        " ranks itself (unset SLURM_STEP_NUM_TASKS if this shell merely inherited it)"));
  }
  const std::optional<std::string> job = Lookup(env, "SLURM_JOB_ID");
  if (request.launcher.empty()) {
    command.launcher = job.has_value() ? "srun" : "mpirun";
    if (job.has_value()) {
      command.notes.push_back(absl::StrCat("launching with srun: inside Slurm job ", *job,
                                           " (SLURM_JOB_ID); --launcher mpirun uses mpirun"));
    }
  } else if (request.launcher == "mpirun" || request.launcher == "srun") {
    command.launcher = request.launcher;
    if (job.has_value()) {
      command.notes.push_back(absl::StrCat("launching with ", request.launcher, ": --launcher ",
                                           request.launcher, " (inside Slurm job ", *job, ")"));
    } else if (request.launcher == "srun") {
      command.notes.push_back(absl::StrCat(
          "launching with srun outside a Slurm allocation (SLURM_JOB_ID is not set): srun asks "
          "Slurm for a new allocation of ",
          request.processes,
          " tasks and may wait in the queue; give it a partition and time limit with "
          "--launcher-arg, or submit examples/slurm/train.sbatch"));
    }
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--launcher must be mpirun or srun, got '", request.launcher, "'"));
  }

  const std::string processes = absl::StrCat(request.processes);
  if (command.launcher == "srun") {
    if (job.has_value()) {
      if (absl::Status fits = CheckSlurmTasks(request, env, *job, command.notes); !fits.ok()) {
        return fits;
      }
    }
    // The launcher runs in a background process group: it must not read the terminal. One rank
    // failing ends the others at once instead of leaving them waiting for it until a deadline.
    command.argv = {"srun", "--input", "none", "--ntasks", processes, "--kill-on-bad-exit=1"};
  } else {
    command.argv = {"mpirun", "--stdin", "none", "-np", processes};
    if (request.as_root) command.argv.push_back("--allow-run-as-root");
    // More ranks than cores on one machine (a laptop, a CI runner): let them share cores. In an
    // allocation or with a host list the slots decide, and mpirun says when they do not suffice.
    if (!job.has_value() && !NamesHosts(request.launcher_args) &&
        request.processes > request.local_cpus) {
      command.argv.insert(command.argv.end(), {"--oversubscribe", "--bind-to", "none"});
    }
  }
  command.argv.insert(command.argv.end(), request.launcher_args.begin(),
                      request.launcher_args.end());
  command.argv.insert(command.argv.end(), request.worker_argv.begin(), request.worker_argv.end());
  return command;
}

}  // namespace gpipe

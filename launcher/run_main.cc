// gpipe-run: checks a plan and launches its job: `mpirun -np K gpipe-worker --plan PLAN ...`, or
// `srun --ntasks K --kill-on-bad-exit=1 ...` inside a Slurm allocation (SLURM_JOB_ID set), where
// it first checks the allocation's task count (launch_command.h decides). Its exit code is the
// job's (gpipe-worker's codes: 0 finished, 1 failed, 3 stopped as asked), 2 for its own usage
// errors (a launcher not found on PATH included), 3 for a stop asked for before the launch,
// 127 when the launcher found could not be executed, 128 + N after a second signal N.
//
// Signals (handlers installed first thing): the launcher runs in its own process group, so the
// terminal's Ctrl-C reaches only gpipe-run (mpirun would kill the job within about two seconds).
// The first SIGINT, SIGTERM, SIGHUP or SIGQUIT is passed on as SIGUSR1 (launcher_process.h),
// which mpirun and srun forward to every rank: the ranks finish the step, save a checkpoint when
// the plan has one, and exit with 3. A second signal ends gpipe-run at once, and the launcher,
// which gets SIGTERM when gpipe-run dies, ends the job.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "launcher/environment.h"
#include "launcher/executable_lookup.h"
#include "launcher/flags.h"
#include "launcher/launch_command.h"
#include "launcher/launcher_output.h"
#include "launcher/launcher_process.h"
#include "launcher/stop_signals.h"
#include "launcher/trace_salvage.h"
#include "layers/registry.h"
#include "runtime/estimate/resolve_plan.h"
#include "runtime/plan/plan_analysis.h"
#include "runtime/trace/trace_parts.h"

namespace {

// gpipe-worker's code for a run stopped as asked; also gpipe-run's for a stop before launching.
constexpr int kExitStopped = 3;

constexpr char kUsage[] =
    "usage: gpipe-run [-n N] [--launcher mpirun|srun] [--launcher-arg ARG]... [--dry-run] PLAN\n"
    "                 [worker flags]\n"
    "  -n N                  processes; must equal pipeline.stages x pipeline.data_parallel\n"
    "                        (default: that)\n"
    "  --launcher NAME       mpirun or srun (default: srun inside a Slurm allocation,\n"
    "                        i.e. when SLURM_JOB_ID is set; mpirun elsewhere)\n"
    "  --launcher-arg ARG    extra argument for the launcher (repeatable), e.g. --hostfile\n"
    "  --dry-run             print the command (arguments joined by spaces, unquoted)\n"
    "  --verbose             show mpirun's stderr as it is (by default its banner of a failed\n"
    "                        job, \"Primary job terminated normally ...\", is left out: the\n"
    "                        ranks' error lines say what failed)\n"
    "  worker flags          --override TEXT (repeatable), --metrics-out FILE, --trace FILE,\n"
    "                        --init-from PATH, --export FILE, --export-dtype D,\n"
    "                        --export-shard-bytes N, --resume CKPT, --start-over,\n"
    "                        --startup-timeout SEC\n"
    "                        (passed to every gpipe-worker; see gpipe-worker --help)\n";

std::string WorkerPath() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return "gpipe-worker";
  return (self.parent_path() / "gpipe-worker").string();
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "gpipe-run: %s\n", message.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // First of all, so that a stop asked for while the plan is checked is not lost either.
  auto signals = gpipe::StopSignals::Install("gpipe-run");
  if (!signals.ok()) return Fail(std::string(signals.status().message()));
  // A closed stdout is seen as EPIPE when relaying the job's output (launcher_output.h).
  ::signal(SIGPIPE, SIG_IGN);
  const std::vector<std::string> args(argv + 1, argv + argc);
  auto flags = gpipe::ParseFlags({{"n"},
                                  {"launcher"},
                                  {"launcher-arg", true, true},
                                  {"dry-run", false},
                                  {"verbose", false},
                                  {"help", false},
                                  {"override", true, true},
                                  {"metrics-out"},
                                  {"trace"},
                                  {"init-from"},
                                  {"export"},
                                  {"export-dtype"},
                                  {"export-shard-bytes"},
                                  {"resume"},
                                  {"start-over", false},
                                  {"startup-timeout"}},
                                 args);
  if (!flags.ok()) return Fail(absl::StrCat(flags.status().message(), "\n", kUsage));
  if (flags->Has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (flags->positional().size() != 1) return Fail(absl::StrCat("expected one PLAN\n", kUsage));
  const std::string plan_path = flags->positional()[0];
  const std::vector<std::string> overrides = flags->GetAll("override");

  auto resolved = gpipe::ResolvePlan(gpipe::PlanFile{.path = plan_path}, overrides,
                                     gpipe::LayerRegistry::WithBuiltins());
  if (!resolved.ok()) return Fail(std::string(resolved.status().message()));
  const gpipe::AnalyzedPlan& analyzed = resolved->analyzed;
  // One process per stage of every data-parallel replica.
  int64_t processes =
      int64_t{analyzed.plan.pipeline().stages()} * analyzed.plan.pipeline().data_parallel();
  if (auto n = flags->Get("n")) {
    auto parsed = gpipe::ParseProcessCountFlag("-n", *n);
    if (!parsed.ok()) return Fail(std::string(parsed.status().message()));
    processes = *parsed;
    const absl::Status fits = gpipe::CheckWorldSize(analyzed, resolved->loaded, *parsed);
    if (!fits.ok()) return Fail(std::string(fits.message()));
  }

  if (auto timeout = flags->Get("startup-timeout")) {
    auto seconds = gpipe::ParseSecondsFlag("--startup-timeout", *timeout);
    if (!seconds.ok()) return Fail(std::string(seconds.status().message()));
  }
  std::vector<std::string> worker = {WorkerPath(), "--plan", plan_path};
  for (const std::string& o : overrides) worker.insert(worker.end(), {"--override", o});
  for (const char* name : {"metrics-out", "trace", "init-from", "export", "export-dtype",
                           "export-shard-bytes", "resume", "startup-timeout"}) {
    if (auto value = flags->Get(name))
      worker.insert(worker.end(), {absl::StrCat("--", name), *value});
  }
  if (flags->Has("start-over")) worker.push_back("--start-over");
  // Ranks other than 0 never read the plan, so the plan's start-up limit travels as a flag.
  if (!flags->Has("startup-timeout")) {
    worker.insert(
        worker.end(),
        {"--startup-timeout", absl::StrCat(analyzed.plan.runtime().timeouts().startup_seconds())});
  }
  gpipe::LaunchRequest request;
  request.processes = processes;
  request.processes_origin =
      absl::StrCat("pipeline.stages ", analyzed.plan.pipeline().stages(),
                   " x pipeline.data_parallel ", analyzed.plan.pipeline().data_parallel());
  request.launcher = flags->Get("launcher").value_or("");
  request.launcher_args = flags->GetAll("launcher-arg");
  request.worker_argv = std::move(worker);
  request.as_root = ::geteuid() == 0;
  request.local_cpus = std::thread::hardware_concurrency();
  auto launch = gpipe::BuildLaunchCommand(request, gpipe::ProcessEnvironment());
  if (!launch.ok()) return Fail(std::string(launch.status().message()));
  for (const std::string& note : launch->notes)
    std::fprintf(stderr, "gpipe-run: %s\n", note.c_str());
  std::vector<std::string>& command = launch->argv;

  if (flags->Has("dry-run")) {
    std::printf("%s\n", absl::StrJoin(command, " ").c_str());
    return 0;
  }
  // Found before the fork: a missing launcher is a usage error, not the child's exit code 127.
  const auto environment = gpipe::ProcessEnvironment();
  auto executable =
      gpipe::FindExecutable(command[0], gpipe::Lookup(environment, "PATH").value_or(""));
  if (!executable.ok()) {
    return Fail(absl::StrCat(executable.status().message(), "; install ", command[0],
                             launch->launcher == "srun" ? ", run inside a Slurm allocation" : "",
                             " or choose another --launcher"));
  }
  command[0] = *executable;
  if ((*signals)->requested()) {
    std::fprintf(stderr, "gpipe-run: %s before the job was launched: nothing ran\n",
                 gpipe::StopSignals::Name((*signals)->signal()));
    return kExitStopped;
  }
  // mpirun's stderr through the filter unless --verbose (srun's is left as it is); the
  // launcher's stdout always through gpipe-run. Without pipes the launcher writes directly.
  const bool filtered = launch->launcher == "mpirun" && !flags->Has("verbose");
  auto output = gpipe::LauncherOutput::Open(filtered);
  const auto launched = std::filesystem::file_time_type::clock::now();
  // Every rank is this machine's, under the launcher, only with a plain mpirun outside Slurm
  // (--launcher-arg may name hosts); then a stop is forwarded as soon as all of them can take it.
  gpipe::LocalRanks local;
  if (launch->launcher == "mpirun" && request.launcher_args.empty() &&
      !gpipe::Lookup(environment, "SLURM_JOB_ID").has_value()) {
    local.all_local = processes;
  }
  const int exit_code =
      gpipe::RunLauncher(command, **signals, local, output.ok() ? &*output : nullptr);
  // A job that ended without rank 0 writing its trace: what the ranks saved of it.
  const std::string trace = flags->Get("trace").value_or(analyzed.plan.runtime().trace());
  const std::string salvaged =
      gpipe::SalvageTrace(trace, gpipe::TraceRunInfoOf(analyzed.plan, static_cast<int>(processes)),
                          exit_code, launched);
  if (!salvaged.empty()) std::fprintf(stderr, "gpipe-run: %s\n", salvaged.c_str());
  return exit_code;
}

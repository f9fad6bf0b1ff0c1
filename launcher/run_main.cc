// gpipe-run: checks a plan and launches its job: `mpirun -np K gpipe-worker --plan PLAN ...`
// (or srun under Slurm). Its exit code is the job's.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "launcher/flags.h"
#include "layers/registry.h"
#include "runtime/coord/plan_balance.h"
#include "runtime/plan/plan_analysis.h"
#include "runtime/plan/plan_loader.h"

namespace {

constexpr char kUsage[] =
    "usage: gpipe-run [-n N] [--launcher mpirun|srun] [--launcher-arg ARG]... [--dry-run] PLAN\n"
    "                 [worker flags]\n"
    "  -n N                  processes; must equal pipeline.stages x pipeline.data_parallel\n"
    "                        (default: that)\n"
    "  --launcher NAME       mpirun (default) or srun (inside a Slurm allocation)\n"
    "  --launcher-arg ARG    extra argument for the launcher (repeatable), e.g. --hostfile\n"
    "  --dry-run             print the command (arguments joined by spaces, unquoted)\n"
    "  worker flags          --override TEXT (repeatable), --metrics-out FILE, --trace FILE,\n"
    "                        --init-from FILE, --export FILE, --startup-timeout SEC\n"
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
  const std::vector<std::string> args(argv + 1, argv + argc);
  auto flags = gpipe::ParseFlags({{"n"},
                                  {"launcher"},
                                  {"launcher-arg", true, true},
                                  {"dry-run", false},
                                  {"help", false},
                                  {"override", true, true},
                                  {"metrics-out"},
                                  {"trace"},
                                  {"init-from"},
                                  {"export"},
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

  auto loaded = gpipe::LoadPlanFile(plan_path, overrides);
  if (!loaded.ok()) return Fail(std::string(loaded.status().message()));
  const gpipe::LayerRegistry registry = gpipe::LayerRegistry::WithBuiltins();
  if (absl::Status resolved = gpipe::ResolveProfileBalance(*loaded, registry); !resolved.ok()) {
    return Fail(std::string(resolved.message()));
  }
  auto analyzed = gpipe::AnalyzePlan(*loaded, registry);
  if (!analyzed.ok()) return Fail(std::string(analyzed.status().message()));
  // One process per stage of every data-parallel replica.
  int64_t processes =
      int64_t{analyzed->plan.pipeline().stages()} * analyzed->plan.pipeline().data_parallel();
  if (auto n = flags->Get("n")) {
    auto parsed = gpipe::ParseIntFlag("-n", *n);
    if (!parsed.ok()) return Fail(std::string(parsed.status().message()));
    processes = *parsed;
    const absl::Status fits =
        gpipe::CheckWorldSize(*analyzed, *loaded, static_cast<int>(processes));
    if (!fits.ok()) return Fail(std::string(fits.message()));
  }

  if (auto timeout = flags->Get("startup-timeout")) {
    auto seconds = gpipe::ParseSecondsFlag("--startup-timeout", *timeout);
    if (!seconds.ok()) return Fail(std::string(seconds.status().message()));
  }
  const std::string launcher = flags->Get("launcher").value_or("mpirun");
  std::vector<std::string> command;
  if (launcher == "mpirun") {
    command = {"mpirun", "-np", absl::StrCat(processes)};
    if (geteuid() == 0) command.push_back("--allow-run-as-root");
    if (processes > static_cast<int64_t>(std::thread::hardware_concurrency())) {
      command.insert(command.end(), {"--oversubscribe", "--bind-to", "none"});
    }
  } else if (launcher == "srun") {
    command = {"srun", "-n", absl::StrCat(processes)};
  } else {
    return Fail(absl::StrCat("--launcher must be mpirun or srun, got '", launcher, "'"));
  }
  for (const std::string& extra : flags->GetAll("launcher-arg")) command.push_back(extra);
  command.insert(command.end(), {WorkerPath(), "--plan", plan_path});
  for (const std::string& o : overrides) command.insert(command.end(), {"--override", o});
  for (const char* name : {"metrics-out", "trace", "init-from", "export", "startup-timeout"}) {
    if (auto value = flags->Get(name))
      command.insert(command.end(), {absl::StrCat("--", name), *value});
  }
  // Ranks other than 0 never read the plan, so the plan's start-up limit travels as a flag.
  if (!flags->Has("startup-timeout")) {
    command.insert(
        command.end(),
        {"--startup-timeout", absl::StrCat(analyzed->plan.runtime().timeouts().startup_seconds())});
  }

  if (flags->Has("dry-run")) {
    std::printf("%s\n", absl::StrJoin(command, " ").c_str());
    return 0;
  }
  std::vector<char*> exec_args;
  for (std::string& part : command) exec_args.push_back(part.data());
  exec_args.push_back(nullptr);
  std::fflush(stdout);
  execvp(exec_args[0], exec_args.data());
  return Fail(absl::StrCat("could not start ", command[0], ": ", std::strerror(errno)));
}

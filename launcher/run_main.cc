// gpipe-run: checks a plan and launches its job: `mpirun -np K gpipe-worker --plan PLAN ...`, or
// `srun --ntasks K --kill-on-bad-exit=1 ...` inside a Slurm allocation (SLURM_JOB_ID set), where
// it first checks the allocation's task count (launch_command.h decides). Its exit code is the
// job's (gpipe-worker's codes: 0 finished, 1 failed, 3 stopped as asked), 2 for its own usage
// errors, 128 + N after a second signal N.
//
// Signals: the launcher runs in its own process group, so the terminal's Ctrl-C reaches only
// gpipe-run (mpirun would kill the job within about two seconds). The first SIGINT or SIGTERM is
// passed on as SIGUSR1, which mpirun and srun forward to every rank: the ranks finish the step,
// save a checkpoint when the plan has one, and exit with 3. A second signal ends gpipe-run at
// once, and the launcher, which gets SIGTERM when gpipe-run dies, ends the job.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "launcher/environment.h"
#include "launcher/flags.h"
#include "launcher/launch_command.h"
#include "launcher/launcher_report_filter.h"
#include "launcher/stop_signals.h"
#include "layers/registry.h"
#include "runtime/estimate/resolve_plan.h"
#include "runtime/plan/plan_analysis.h"

namespace {

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
    "                        --init-from FILE, --export FILE, --resume CKPT, --start-over,\n"
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

void WriteAll(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text.remove_prefix(static_cast<size_t>(n));
  }
}

// The launcher's stderr, read through a pipe and passed on through a LauncherReportFilter.
class FilteredReport {
 public:
  // The pipe, or none (unfiltered) when it cannot be made.
  static std::optional<FilteredReport> Open() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return std::nullopt;
    ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
    return FilteredReport(fds[0], fds[1]);
  }
  FilteredReport(FilteredReport&& other) noexcept
      : read_(std::exchange(other.read_, -1)), write_(std::exchange(other.write_, -1)) {}
  FilteredReport(const FilteredReport&) = delete;
  FilteredReport& operator=(const FilteredReport&) = delete;
  ~FilteredReport() {
    if (read_ >= 0) ::close(read_);
    if (write_ >= 0) ::close(write_);
  }

  // In the launcher's process, before exec: its stderr becomes the pipe.
  void AttachChild() const { ::dup2(write_, STDERR_FILENO); }
  // In gpipe-run, after the fork: only the launcher holds the writing end.
  void DetachParent() {
    ::close(write_);
    write_ = -1;
  }
  // Passes on what arrives within `wait_ms` (none: what is there now). False at end of file.
  bool Pump(int wait_ms) {
    if (read_ < 0) return false;
    pollfd ready{.fd = read_, .events = POLLIN, .revents = 0};
    const int polled = ::poll(&ready, 1, wait_ms);
    if (polled == 0 || (polled < 0 && errno == EINTR)) return true;
    if (polled < 0) {
      // poll itself failed: stop reading (the caller then waits with its own sleep) instead of
      // spinning on an error that returns at once.
      ::close(read_);
      read_ = -1;
      return false;
    }
    char buffer[4096];
    while (true) {
      const ssize_t n = ::read(read_, buffer, sizeof(buffer));
      if (n > 0) {
        WriteAll(STDERR_FILENO, filter_.Feed(std::string_view(buffer, static_cast<size_t>(n))));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      ::close(read_);  // end of file (or an error: nothing more will come)
      read_ = -1;
      return false;
    }
  }
  // After the launcher ended: what it still wrote (for at most a second, in case a process it
  // started keeps the pipe open), then the filter's remainder.
  void Drain() {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (Pump(20) && std::chrono::steady_clock::now() < until) {
    }
    WriteAll(STDERR_FILENO, filter_.Finish());
  }

 private:
  FilteredReport(int read, int write) : read_(read), write_(write) {}

  int read_;
  int write_;
  gpipe::LauncherReportFilter filter_;
};

// Runs `command` in its own process group and waits for it, passing the first stop signal on as
// SIGUSR1 (see the top of this file); with `report`, its stderr goes through that filter. Returns
// its exit code (128 + N when a signal N killed it).
int RunLauncher(std::vector<std::string>& command, std::optional<FilteredReport> report) {
  auto signals = gpipe::StopSignals::Install("gpipe-run");
  if (!signals.ok()) return Fail(std::string(signals.status().message()));
  std::vector<char*> exec_args;
  for (std::string& part : command) exec_args.push_back(part.data());
  exec_args.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child < 0) return Fail(absl::StrCat("fork: ", std::strerror(errno)));
  if (child == 0) {
    ::setpgid(0, 0);
    // The launcher ends the job when gpipe-run dies, however it dies.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(128 + SIGTERM);
    if (report.has_value()) report->AttachChild();
    // Handlers do not survive exec; the signal mask does.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execvp(exec_args[0], exec_args.data());
    std::fprintf(stderr, "gpipe-run: could not start %s: %s\n", exec_args[0], std::strerror(errno));
    ::_exit(127);
  }
  ::setpgid(child, child);  // also here: whichever runs first
  if (report.has_value()) report->DetachParent();
  bool forwarded = false;
  bool reading = report.has_value();
  while (true) {
    int status = 0;
    const pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child) {
      if (report.has_value()) report->Drain();
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      return 128 + WTERMSIG(status);
    }
    if (done < 0 && errno != EINTR) return Fail(absl::StrCat("waitpid: ", std::strerror(errno)));
    if ((*signals)->requested() && !forwarded) {
      forwarded = true;
      std::fprintf(stderr,
                   "gpipe-run: %s: asking every rank to stop after its current step (signal "
                   "again to stop at once)\n",
                   ::strsignal((*signals)->signal()));
      ::kill(child, SIGUSR1);
    }
    if (reading) {
      reading = report->Pump(20);
    } else {
      ::usleep(20'000);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
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
    auto parsed = gpipe::ParseIntFlag("-n", *n);
    if (!parsed.ok()) return Fail(std::string(parsed.status().message()));
    processes = *parsed;
    const absl::Status fits =
        gpipe::CheckWorldSize(analyzed, resolved->loaded, static_cast<int>(processes));
    if (!fits.ok()) return Fail(std::string(fits.message()));
  }

  if (auto timeout = flags->Get("startup-timeout")) {
    auto seconds = gpipe::ParseSecondsFlag("--startup-timeout", *timeout);
    if (!seconds.ok()) return Fail(std::string(seconds.status().message()));
  }
  std::vector<std::string> worker = {WorkerPath(), "--plan", plan_path};
  for (const std::string& o : overrides) worker.insert(worker.end(), {"--override", o});
  for (const char* name :
       {"metrics-out", "trace", "init-from", "export", "resume", "startup-timeout"}) {
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
  // mpirun's stderr through the filter unless --verbose (srun's is left as it is).
  const bool filtered = launch->launcher == "mpirun" && !flags->Has("verbose");
  return RunLauncher(command, filtered ? FilteredReport::Open() : std::nullopt);
}

#include "launcher/launcher_process.h"

#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"

namespace gpipe {

bool CatchesSignal(pid_t pid, int signo) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "SigCgt:")) continue;
    uint64_t mask = 0;
    if (!absl::SimpleHexAtoi(absl::StripAsciiWhitespace(rest), &mask)) return true;
    return (mask >> (signo - 1)) & 1;
  }
  return true;
}

namespace {

// /proc/PID/stat: "pid (comm) state ppid ...".
bool ReadParent(const std::string& pid, pid_t& ppid, std::string& comm) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string text;
  if (!std::getline(in, text)) return false;
  const size_t open = text.find('('), close = text.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close + 4 > text.size()) {
    return false;
  }
  comm = text.substr(open + 1, close - open - 1);
  const size_t end = text.find(' ', close + 4);
  return absl::SimpleAtoi(text.substr(close + 4, end - close - 4), &ppid);
}

// Whether SIGUSR1 sent to the launcher now reaches every rank and kills none: the launcher
// catches it, and exactly `expected` gpipe-worker processes under it exist and catch it too. A
// rank forked but not yet exec'd is not a gpipe-worker yet (and would die of the signal), hence
// the count; ranks elsewhere are never seen, so without `expected` this is never true.
bool ReadyToForward(pid_t launcher, std::optional<int64_t> expected) {
  if (!expected.has_value() || !CatchesSignal(launcher, SIGUSR1)) return false;
  std::vector<std::pair<pid_t, pid_t>> parent_of;  // (pid, ppid) of every gpipe-worker
  std::vector<std::pair<pid_t, pid_t>> all;
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return false;
  while (const dirent* entry = ::readdir(dir)) {
    pid_t pid = 0, ppid = 0;
    std::string comm;
    if (!absl::SimpleAtoi(entry->d_name, &pid) || !ReadParent(entry->d_name, ppid, comm)) continue;
    all.emplace_back(pid, ppid);
    if (comm == "gpipe-worker") parent_of.emplace_back(pid, ppid);
  }
  ::closedir(dir);
  const auto descends = [&all, launcher](pid_t pid) {
    for (int depth = 0; depth < 8 && pid > 1; ++depth) {
      if (pid == launcher) return true;
      const auto it =
          std::find_if(all.begin(), all.end(), [pid](const auto& p) { return p.first == pid; });
      if (it == all.end()) return false;
      pid = it->second;
    }
    return false;
  };
  int64_t ranks = 0;
  for (const auto& [pid, ppid] : parent_of) {
    if (!descends(ppid)) continue;
    if (!CatchesSignal(pid, SIGUSR1)) return false;
    ++ranks;
  }
  return ranks == *expected;
}

}  // namespace

int RunLauncher(const std::vector<std::string>& command, const StopSignals& signals,
                LocalRanks ranks, LauncherOutput* output) {
  std::vector<char*> exec_args;
  for (const std::string& part : command) exec_args.push_back(const_cast<char*>(part.c_str()));
  exec_args.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = ::getpid();
  // Every signal blocked across the fork: between fork and exec the child has gpipe-run's
  // handlers, which would record a signal meant for it (PR_SET_PDEATHSIG's SIGTERM) and lose it.
  sigset_t all, previous;
  sigfillset(&all);
  ::sigprocmask(SIG_SETMASK, &all, &previous);
  const pid_t child = ::fork();
  if (child < 0) {
    const int error = errno;
    ::sigprocmask(SIG_SETMASK, &previous, nullptr);
    std::fprintf(stderr, "gpipe-run: fork: %s\n", std::strerror(error));
    return 2;
  }
  if (child == 0) {
    // A stop signal sent to gpipe-run's process group (Ctrl-C) before the child left it is
    // gpipe-run's to record, not the launcher's to die of: ignoring discards a pending one.
    for (int signo : StopSignals::kSignals) ::signal(signo, SIG_IGN);
    ::setpgid(0, 0);
    // Then the defaults (gpipe-run ignores SIGPIPE; the stop signals' handlers are its own):
    // ignored signals and the mask survive exec, handlers do not.
    for (int signo : StopSignals::kSignals) ::signal(signo, SIG_DFL);
    ::signal(SIGPIPE, SIG_DFL);
    // The launcher ends the job when gpipe-run dies, however it dies: a SIGTERM that comes from
    // here on stays pending and, unmasked below, ends the child with the default action.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(128 + SIGTERM);
    if (output != nullptr) output->AttachChild();
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execv(exec_args[0], exec_args.data());
    // Only when the file found on PATH before the fork could not be executed after all.
    std::fprintf(stderr, "gpipe-run: could not start %s: %s\n", exec_args[0], std::strerror(errno));
    ::_exit(127);
  }
  ::sigprocmask(SIG_SETMASK, &previous, nullptr);
  ::setpgid(child, child);  // also here: whichever runs first
  if (output != nullptr) output->DetachParent();
  bool forwarded = false;
  std::optional<std::chrono::steady_clock::time_point> asked;
  // The stop request passed on to the launcher once the ranks can take it (launcher_process.h).
  const auto forward_stop = [&] {
    if (!signals.requested() || forwarded) return;
    const auto now = std::chrono::steady_clock::now();
    const bool ready = ReadyToForward(child, ranks.all_local);
    if (!asked.has_value()) {
      asked = now;
      // Said at once: the forward may wait up to kForwardWait.
      if (!ready) {
        std::fprintf(stderr,
                     "gpipe-run: %s: stop requested; passed on to the ranks once they can take "
                     "it, within %lld s (signal again to stop at once)\n",
                     StopSignals::Name(signals.signal()),
                     static_cast<long long>(kForwardWait.count()));
      }
    }
    if (ready || now - *asked >= kForwardWait) {
      forwarded = true;
      ::kill(child, SIGUSR1);  // first: the line below may wait for a paused stderr
      std::fprintf(stderr,
                   "gpipe-run: %s: asking every rank to stop after its current step (signal "
                   "again to stop at once)\n",
                   StopSignals::Name(signals.signal()));
    }
  };
  bool reading = output != nullptr;
  // Also while relaying waits for a paused reader of gpipe-run's output.
  if (output != nullptr) output->set_while_blocked(forward_stop);
  while (true) {
    int status = 0;
    const pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child) {
      if (output != nullptr) {
        output->Drain();
        output->set_while_blocked(nullptr);  // it refers to this frame
      }
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      return 128 + WTERMSIG(status);
    }
    if (done < 0 && errno != EINTR) {
      if (output != nullptr) output->set_while_blocked(nullptr);
      std::fprintf(stderr, "gpipe-run: waitpid: %s\n", std::strerror(errno));
      return 2;
    }
    forward_stop();
    if (reading) {
      reading = output->Pump(20);
    } else {
      ::usleep(20'000);
    }
  }
}

}  // namespace gpipe

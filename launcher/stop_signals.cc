#include "launcher/stop_signals.h"

#include <unistd.h>

#include <atomic>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace gpipe {
namespace {

// The handler's state: the only thing a signal handler may touch are lock-free atomics.
std::atomic<int> first_signal{0};
std::atomic<int> signals_seen{0};
std::atomic<const char*> program_name{nullptr};
std::atomic<bool> installed{false};

static_assert(std::atomic<int>::is_always_lock_free);

// Async-signal-safe: atomics, write(2) and _exit(2) only.
void OnSignal(int signo) {
  // SIGUSR1 is only ever the forwarded copy of a request (gpipe-run's, or mpirun's and srun's of
  // it): after a request it is not a second signal. Under Slurm's pre-emption every task and
  // gpipe-run get SIGTERM, and gpipe-run's SIGUSR1 then arrives at the ranks too.
  if (signo == SIGUSR1 && signals_seen.load() != 0) return;
  if (signals_seen.fetch_add(1) == 0) {
    first_signal.store(signo);
    return;
  }
  const char* program = program_name.load();
  const char* parts[] = {program, ": second signal (", StopSignals::Name(signo),
                         "): exiting at once\n"};
  for (const char* part : parts) {
    ssize_t ignored = ::write(STDERR_FILENO, part, std::strlen(part));
    (void)ignored;
  }
  ::_exit(128 + signo);
}

// OnSignal with every stop signal blocked while it runs: a second one cannot come between the
// count and the record of the first.
struct sigaction HandlerAction() {
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  for (int signo : StopSignals::kSignals) sigaddset(&action.sa_mask, signo);
  action.sa_flags = SA_RESTART;
  return action;
}

}  // namespace

absl::StatusOr<std::unique_ptr<StopSignals>> StopSignals::Install(const char* program) {
  if (installed.exchange(true)) {
    return absl::FailedPreconditionError("stop-signal handlers are already installed");
  }
  first_signal.store(0);
  signals_seen.store(0);
  program_name.store(program);
  std::unique_ptr<StopSignals> signals(new StopSignals());
  const struct sigaction action = HandlerAction();
  for (size_t i = 0; i < kSignals.size(); ++i) {
    if (::sigaction(kSignals[i], &action, &signals->previous_[i]) != 0) {
      const int error = errno;
      for (size_t j = 0; j < i; ++j) ::sigaction(kSignals[j], &signals->previous_[j], nullptr);
      installed.store(false);
      return absl::InternalError(absl::StrCat("sigaction: ", std::strerror(error)));
    }
  }
  // A stop signal blocked and pending since before this process began (the mask survives exec)
  // is delivered now, to the handler.
  sigset_t stop;
  sigemptyset(&stop);
  for (int signo : kSignals) sigaddset(&stop, signo);
  ::sigprocmask(SIG_UNBLOCK, &stop, nullptr);
  return signals;
}

StopSignals::~StopSignals() {
  for (size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &previous_[i], nullptr);
  installed.store(false);
}

int StopSignals::signal() const { return first_signal.load(); }

int StopSignals::Reassert() {
  int replaced = 0;
  for (int signo : kSignals) {
    struct sigaction current {};
    if (::sigaction(signo, nullptr, &current) != 0 || current.sa_handler == OnSignal) continue;
    const struct sigaction action = HandlerAction();
    if (::sigaction(signo, &action, nullptr) == 0) ++replaced;
  }
  return replaced;
}

const char* StopSignals::Name(int signo) {
  switch (signo) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGHUP:
      return "SIGHUP";
    case SIGQUIT:
      return "SIGQUIT";
    default:
      return "a signal";
  }
}

}  // namespace gpipe

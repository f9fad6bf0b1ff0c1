// StopSignals: how gpipe's programs take SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGUSR1 (Ctrl-C,
// Slurm's pre-emption, a closed terminal, Ctrl-\, a batch script's warning signal, gpipe-run's
// forwarding). The first such signal
// only records a stop request that the program polls (requested()) and acts on at a safe point;
// a second SIGINT, SIGTERM, SIGHUP or SIGQUIT ends the process at once with exit code 128 + its
// number, after one line on stderr naming the program and the signal. A SIGUSR1 after a request
// is not a second signal: it is only ever the forwarded copy of a request (Slurm's pre-emption
// sends SIGTERM to every task and to gpipe-run, whose forwarded SIGUSR1 follows).
//
// Signal dispositions belong to the process, so the handlers' state is the one process-wide
// variable in gpipe, kept in stop_signals.cc; at most one StopSignals may exist at a time, and
// the destructor restores the handlers it replaced. Embedding programs that handle signals
// themselves do not create one: they set WorkerOptions::stop_requested instead.
#ifndef GPIPE_LAUNCHER_STOP_SIGNALS_H_
#define GPIPE_LAUNCHER_STOP_SIGNALS_H_

#include <signal.h>

#include <array>
#include <memory>

#include "absl/status/statusor.h"

namespace gpipe {

class StopSignals {
 public:
  // `program` (a string literal: it is used inside the handler) names the process on stderr.
  // The signals are unblocked, so one that was pending (blocked since before exec) counts.
  // FAILED_PRECONDITION when another StopSignals exists; INTERNAL when sigaction fails.
  static absl::StatusOr<std::unique_ptr<StopSignals>> Install(const char* program);
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Whether a stop was requested, and by which signal (0: none yet).
  bool requested() const { return signal() != 0; }
  int signal() const;

  // Installs the handlers again where something replaced them since Install (a library's
  // initialization, e.g. MPI_Init), keeping the requests recorded so far. Returns how many had
  // been replaced.
  int Reassert();

  static constexpr std::array<int, 5> kSignals = {SIGINT, SIGTERM, SIGUSR1, SIGHUP, SIGQUIT};
  // "SIGINT", ...; "a signal" for any other. Async-signal-safe.
  static const char* Name(int signo);

 private:
  StopSignals() = default;
  std::array<struct sigaction, kSignals.size()> previous_{};
};

}  // namespace gpipe

#endif  // GPIPE_LAUNCHER_STOP_SIGNALS_H_

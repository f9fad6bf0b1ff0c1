#include "runtime/comm/wait.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "runtime/comm/mpi_status.h"
#include "runtime/core/check.h"

namespace gpipe {

absl::Status PollUntil(absl::FunctionRef<absl::StatusOr<bool>()> poll, absl::Time deadline,
                       const AbortPoller& abort_poller, const Clock& clock,
                       absl::FunctionRef<std::string()> describe) {
  const absl::Time start = clock.Now();
  absl::Duration sleep = kFirstPollSleep;
  while (true) {
    absl::StatusOr<bool> done = poll();
    if (!done.ok()) return done.status();
    if (*done) return absl::OkStatus();
    if (abort_poller) {
      if (std::optional<std::string> abort = abort_poller()) return absl::AbortedError(*abort);
    }
    const absl::Time now = clock.Now();
    if (now >= deadline) {
      // The time this wait was allowed (a late wake-up on a loaded machine is not news).
      const absl::Duration allowed = std::max(deadline - start, absl::ZeroDuration());
      return absl::DeadlineExceededError(
          absl::StrFormat("%s: no progress after %.1fs; the peer rank may be stuck or dead",
                          describe(), absl::ToDoubleSeconds(allowed)));
    }
    clock.SleepFor(std::min(sleep, deadline - now));
    sleep = std::min(sleep * 2, kMaxPollSleep);
  }
}

absl::StatusOr<bool> TestRequests(std::span<MPI_Request> requests, std::span<MPI_Status> statuses) {
  GPIPE_CHECK(statuses.empty() || statuses.size() == requests.size());
  bool all_done = true;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (requests[i] == MPI_REQUEST_NULL) continue;
    int done = 0;
    MPI_Status status;
    const int code = MPI_Test(&requests[i], &done, &status);
    if (code != MPI_SUCCESS) {
      // MPI frees a request that finished in error; make sure it reads as finished.
      requests[i] = MPI_REQUEST_NULL;
      return MpiStatus(code, "MPI_Test");
    }
    if (!done) {
      all_done = false;
      continue;
    }
    if (!statuses.empty()) statuses[i] = status;
  }
  return all_done;
}

int CancelRequests(std::span<MPI_Request> requests, const Clock& clock, absl::Duration grace,
                   bool cancel) {
  if (cancel) {
    for (MPI_Request& request : requests) {
      // A failed cancel leaves the request active; the polling below then leaves it orphaned.
      if (request != MPI_REQUEST_NULL) MPI_Cancel(&request);
    }
  }
  const absl::Time deadline = clock.Now() + grace;
  // Requests that finish in error are finished too; only "still active" matters here.
  (void)PollUntil(
      [&]() -> absl::StatusOr<bool> {
        for (MPI_Request& request : requests) {
          if (request == MPI_REQUEST_NULL) continue;
          int done = 0;
          if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            request = MPI_REQUEST_NULL;
          }
        }
        return std::all_of(requests.begin(), requests.end(),
                           [](MPI_Request r) { return r == MPI_REQUEST_NULL; });
      },
      deadline, AbortPoller(), clock, [] { return std::string("cancelling requests"); });
  return static_cast<int>(std::count_if(requests.begin(), requests.end(),
                                        [](MPI_Request r) { return r != MPI_REQUEST_NULL; }));
}

absl::Status WaitForRequests(std::span<MPI_Request> requests, std::span<MPI_Status> statuses,
                             absl::Time deadline, const AbortPoller& abort_poller,
                             const Clock& clock, absl::FunctionRef<std::string()> describe,
                             bool cancel_on_failure) {
  absl::Status status = PollUntil([&] { return TestRequests(requests, statuses); }, deadline,
                                  abort_poller, clock, describe);
  if (!status.ok()) CancelRequests(requests, clock, kCancelGrace, cancel_on_failure);
  return status;
}

}  // namespace gpipe

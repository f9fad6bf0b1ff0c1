// The one polling wait behind every blocking operation in comm/: poll, check for a job abort,
// check the deadline, sleep with back-off (20us doubling to 100us: ranks may share cores, so
// waits never spin hot, yet a message that arrives mid-sleep waits at most 100us; 1ms made
// 1F1B-type schedules, whose every backward waits on a just-sent gradient, measurably slower).
// A wait ends with OK, the poll's error, ABORTED ("rank R aborted the job:
// ...") or DEADLINE_EXCEEDED naming what was awaited. Thread-compatible (MPI is SERIALIZED).
#ifndef GPIPE_RUNTIME_COMM_WAIT_H_
#define GPIPE_RUNTIME_COMM_WAIT_H_

#include <mpi.h>

#include <functional>
#include <optional>
#include <span>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/comm/clock.h"

namespace gpipe {

// Returns a message ("rank R aborted the job: <why>") once some rank has aborted the job;
// nullopt while none has. An empty function means "never aborts".
using AbortPoller = std::function<std::optional<std::string>()>;

inline constexpr absl::Duration kFirstPollSleep = absl::Microseconds(20);
inline constexpr absl::Duration kMaxPollSleep = absl::Microseconds(100);

// Calls `poll` until it returns true (-> OK) or an error (-> that error), the abort poller
// reports an abort (-> ABORTED with its message) or `deadline` passes (-> DEADLINE_EXCEEDED
// "<describe()>: no progress after <t>s; the peer rank may be stuck or dead"). `poll` runs at
// least once, so work that is already complete succeeds even when the deadline has passed.
absl::Status PollUntil(absl::FunctionRef<absl::StatusOr<bool>()> poll, absl::Time deadline,
                       const AbortPoller& abort_poller, const Clock& clock,
                       absl::FunctionRef<std::string()> describe);

// Tests every active request once (MPI_Test); finished ones become MPI_REQUEST_NULL and, when
// `statuses` is not empty, leave their status at the same index. Returns whether all are done,
// or the MPI error of a request that finished with one (e.g. a truncated receive).
absl::StatusOr<bool> TestRequests(std::span<MPI_Request> requests, std::span<MPI_Status> statuses);

// MPI_Cancel on every active request (when `cancel`), then polls them for up to `grace`.
// Cancelled receives finish at once; sends and already-matched receives may not. Finished
// requests become MPI_REQUEST_NULL; returns how many are still active. Their buffers must stay
// alive until they finish: hand them to OrphanedRequests.
int CancelRequests(std::span<MPI_Request> requests, const Clock& clock, absl::Duration grace,
                   bool cancel = true);

// How long a failed wait gives cancelled requests to finish before it leaves them.
inline constexpr absl::Duration kCancelGrace = absl::Milliseconds(20);

// PollUntil over TestRequests. On failure the requests still active are cancelled (or, for
// non-blocking collectives, which MPI cannot cancel, left alone with `cancel_on_failure` false);
// the ones that stay active remain in `requests` for the caller to orphan.
absl::Status WaitForRequests(std::span<MPI_Request> requests, std::span<MPI_Status> statuses,
                             absl::Time deadline, const AbortPoller& abort_poller,
                             const Clock& clock, absl::FunctionRef<std::string()> describe,
                             bool cancel_on_failure = true);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COMM_WAIT_H_

// Helpers for the private communicators the channels run on: a deadline-bounded duplicate
// (MPI_Comm_idup, so a rank that never joins cannot hang the others), its release, and its tag
// limit. Thread-compatible.
#ifndef GPIPE_RUNTIME_COMM_COMMUNICATOR_H_
#define GPIPE_RUNTIME_COMM_COMMUNICATOR_H_

#include <mpi.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/comm/clock.h"
#include "runtime/comm/wait.h"

namespace gpipe {

// Collective over `comm`. The duplicate returns MPI error codes (MPI_ERRORS_RETURN).
// `what` names the purpose in errors ("control channel").
absl::StatusOr<MPI_Comm> DuplicateCommunicator(MPI_Comm comm, absl::Time deadline,
                                               const AbortPoller& abort_poller, const Clock& clock,
                                               const char* what);

// MPI_Comm_free unless MPI is already finalized; leaves MPI_COMM_NULL behind.
void FreeCommunicator(MPI_Comm& comm);

// MPI_TAG_UB of `comm` (from MPI_COMM_WORLD when `comm` does not carry it).
absl::StatusOr<int> TagUpperBound(MPI_Comm comm);

// A channel's private communicator and what the channel needs to know about it.
struct PrivateCommunicator {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 0;
  int tag_upper_bound = 0;
};

// DuplicateCommunicator, then rank, size and tag limit; frees the duplicate on failure.
absl::StatusOr<PrivateCommunicator> CreatePrivateCommunicator(MPI_Comm world, absl::Time deadline,
                                                              const AbortPoller& abort_poller,
                                                              const Clock& clock, const char* what);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COMM_COMMUNICATOR_H_

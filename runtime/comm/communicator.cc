#include "runtime/comm/communicator.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/comm/mpi_status.h"
#include "runtime/comm/orphaned_requests.h"
#include "runtime/core/status_macros.h"

namespace gpipe {

absl::StatusOr<MPI_Comm> DuplicateCommunicator(MPI_Comm comm, absl::Time deadline,
                                               const AbortPoller& abort_poller, const Clock& clock,
                                               const char* what) {
  int rank = -1;
  RETURN_IF_ERROR(MpiStatus(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank"));
  // MPI writes the new handle when the collective completes, which may be after a failed wait.
  auto duplicate = std::make_shared<MPI_Comm>(MPI_COMM_NULL);
  MPI_Request request = MPI_REQUEST_NULL;
  RETURN_IF_ERROR(MpiStatus(MPI_Comm_idup(comm, duplicate.get(), &request), "MPI_Comm_idup"));
  absl::Status status = WaitForRequests(
      std::span<MPI_Request>(&request, 1), {}, deadline, abort_poller, clock,
      [&] {
        return absl::StrCat("rank ", rank, " creating the ", what,
                            " (every rank must do so at start-up)");
      },
      /*cancel_on_failure=*/false);
  if (!status.ok()) {
    OrphanedRequests leftover;
    leftover.Adopt(std::span<MPI_Request>(&request, 1), duplicate, /*collective=*/true);
    return status;
  }
  status =
      MpiStatus(MPI_Comm_set_errhandler(*duplicate, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  if (!status.ok()) {
    FreeCommunicator(*duplicate);
    return status;
  }
  return *duplicate;
}

void FreeCommunicator(MPI_Comm& comm) {
  if (comm == MPI_COMM_NULL) return;
  int finalized = 1;
  if (MPI_Finalized(&finalized) == MPI_SUCCESS && !finalized) MPI_Comm_free(&comm);
  comm = MPI_COMM_NULL;
}

absl::StatusOr<int> TagUpperBound(MPI_Comm comm) {
  int* tag_ub = nullptr;
  int found = 0;
  RETURN_IF_ERROR(MpiStatus(MPI_Comm_get_attr(comm, MPI_TAG_UB, &tag_ub, &found),
                            "MPI_Comm_get_attr(MPI_TAG_UB)"));
  // MPI caches the bound on MPI_COMM_WORLD; a derived communicator (a program's duplicate or
  // split) need not carry it, and the bound is the same for every communicator of the process.
  if (!found) {
    RETURN_IF_ERROR(MpiStatus(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &found),
                              "MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB)"));
  }
  if (!found || tag_ub == nullptr) {
    return absl::InternalError("this MPI does not report MPI_TAG_UB");
  }
  return *tag_ub;
}

absl::StatusOr<PrivateCommunicator> CreatePrivateCommunicator(MPI_Comm world, absl::Time deadline,
                                                              const AbortPoller& abort_poller,
                                                              const Clock& clock,
                                                              const char* what) {
  PrivateCommunicator out;
  ASSIGN_OR_RETURN(out.comm, DuplicateCommunicator(world, deadline, abort_poller, clock, what));
  absl::Status status = MpiStatus(MPI_Comm_rank(out.comm, &out.rank), "MPI_Comm_rank");
  if (status.ok()) status = MpiStatus(MPI_Comm_size(out.comm, &out.size), "MPI_Comm_size");
  if (status.ok()) {
    absl::StatusOr<int> tag_ub = TagUpperBound(out.comm);
    if (tag_ub.ok()) {
      out.tag_upper_bound = *tag_ub;
    } else {
      status = tag_ub.status();
    }
  }
  if (!status.ok()) {
    FreeCommunicator(out.comm);
    return status;
  }
  return out;
}

}  // namespace gpipe

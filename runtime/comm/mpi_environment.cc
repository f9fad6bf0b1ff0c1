#include "runtime/comm/mpi_environment.h"

#include <cstdlib>

#include "runtime/comm/mpi_status.h"
#include "runtime/core/status_macros.h"

namespace gpipe {

absl::StatusOr<std::unique_ptr<MpiEnvironment>> MpiEnvironment::Init(int* argc, char*** argv) {
  int initialized = 0;
  RETURN_IF_ERROR(MpiStatus(MPI_Initialized(&initialized), "MPI_Initialized"));
  int finalized = 0;
  RETURN_IF_ERROR(MpiStatus(MPI_Finalized(&finalized), "MPI_Finalized"));
  if (initialized || finalized) {
    return absl::FailedPreconditionError(
        "MPI is already initialized in this process; create one MpiEnvironment per process");
  }
  int provided = 0;
  RETURN_IF_ERROR(
      MpiStatus(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread"));
  // From here on MPI is running: finalize it on every error path.
  auto finalize_on_error = [](absl::Status status) {
    MPI_Finalize();
    return status;
  };
  if (provided < MPI_THREAD_SERIALIZED) {
    return finalize_on_error(absl::FailedPreconditionError(
        "this MPI library does not support MPI_THREAD_SERIALIZED; gpipe needs it"));
  }
  absl::Status status = MpiStatus(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
                                  "MPI_Comm_set_errhandler(MPI_COMM_WORLD)");
  if (!status.ok()) return finalize_on_error(status);
  int rank = 0;
  int size = 0;
  status = MpiStatus(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
  if (status.ok()) status = MpiStatus(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
  if (!status.ok()) return finalize_on_error(status);
  return std::unique_ptr<MpiEnvironment>(new MpiEnvironment(rank, size));
}

MpiEnvironment::~MpiEnvironment() {
  if (aborting_) return;
  int finalized = 1;
  if (MPI_Finalized(&finalized) == MPI_SUCCESS && !finalized) MPI_Finalize();
}

void AbortJob(int exit_code) {
  int initialized = 0;
  int finalized = 1;
  if (MPI_Initialized(&initialized) == MPI_SUCCESS && initialized &&
      MPI_Finalized(&finalized) == MPI_SUCCESS && !finalized) {
    MPI_Abort(MPI_COMM_WORLD, exit_code);
  }
  std::_Exit(exit_code);
}

}  // namespace gpipe

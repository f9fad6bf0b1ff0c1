// MpiEnvironment: owns MPI for the life of a process. Init starts MPI (thread level
// SERIALIZED), makes MPI_COMM_WORLD return error codes instead of aborting, and the destructor
// finalizes MPI unless the job is aborting. One per process, created and destroyed on the
// thread that drives MPI; destroy every channel before it. Not thread-safe.
#ifndef GPIPE_RUNTIME_COMM_MPI_ENVIRONMENT_H_
#define GPIPE_RUNTIME_COMM_MPI_ENVIRONMENT_H_

#include <mpi.h>

#include <memory>

#include "absl/status/statusor.h"

namespace gpipe {

class MpiEnvironment {
 public:
  // Fails with FAILED_PRECONDITION when MPI was already initialized (or finalized) in this
  // process: MPI can be started once.
  static absl::StatusOr<std::unique_ptr<MpiEnvironment>> Init(int* argc, char*** argv);

  MpiEnvironment(const MpiEnvironment&) = delete;
  MpiEnvironment& operator=(const MpiEnvironment&) = delete;
  ~MpiEnvironment();

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  MPI_Comm world() const { return MPI_COMM_WORLD; }

  // The job is going down through AbortJob: the destructor must not call MPI_Finalize, which
  // would wait for ranks that are never coming.
  void MarkAborting() { aborting_ = true; }

 private:
  MpiEnvironment(int rank, int world_size) : rank_(rank), world_size_(world_size) {}

  int rank_;
  int world_size_;
  bool aborting_ = false;
};

// Ends every process of the job with `exit_code` (MPI_Abort on MPI_COMM_WORLD). Falls back to
// ending this process when MPI is not running or MPI_Abort returns.
[[noreturn]] void AbortJob(int exit_code);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COMM_MPI_ENVIRONMENT_H_

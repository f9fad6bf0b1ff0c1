// RunWorker: the whole life of one gpipe-worker process (one rank, one stage), including
// rank 0's coordinator role. The protocol is documented in worker.cc, where it is implemented.
//
// Returns OK after a complete run. On failure every rank returns a non-OK status: a rejected
// plan is reported the same way on every rank and MPI is finalized normally; a failure during
// training is announced to the other ranks (they stop within their wait deadlines) and the
// MpiEnvironment is marked aborting, so the caller exits without MPI_Finalize.
#ifndef GPIPE_RUNTIME_COORD_WORKER_H_
#define GPIPE_RUNTIME_COORD_WORKER_H_

#include "absl/status/status.h"
#include "runtime/comm/mpi_environment.h"
#include "runtime/coord/worker_options.h"
#include "runtime/core/logger.h"

namespace gpipe {

absl::Status RunWorker(const WorkerOptions& options, MpiEnvironment& mpi, const Logger& logger);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COORD_WORKER_H_

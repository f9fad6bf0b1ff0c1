// The NCCL channel's placement rule: NCCL refuses two ranks of one communicator on one GPU, so
// the channel checks the placements it gathers (GatherPlacements, nccl_bootstrap.h) before NCCL
// is asked. A pure function, built in every variant (no NCCL, no MPI) so it is tested
// everywhere.
#ifndef GPIPE_RUNTIME_COMM_NCCL_NCCL_PLACEMENTS_H_
#define GPIPE_RUNTIME_COMM_NCCL_NCCL_PLACEMENTS_H_

#include <span>
#include <string>

#include "absl/status/status.h"

namespace gpipe {

// For runtime.transport: NCCL: OK when the `placements` (one per rank, indexed by rank, naming
// host and GPU) are all different; otherwise FAILED_PRECONDITION naming the first two ranks that
// share a GPU and the MPI transport (which stages through host memory and allows it) as the
// alternative.
absl::Status CheckDistinctGpus(std::span<const std::string> placements);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COMM_NCCL_NCCL_PLACEMENTS_H_

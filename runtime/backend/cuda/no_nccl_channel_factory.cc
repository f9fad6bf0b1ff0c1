// runtime.transport: NCCL in a build whose CUDA toolkit had no NCCL.
#include "runtime/backend/cuda/nccl_channel_factory.h"

namespace gpipe {

absl::StatusOr<std::unique_ptr<DataChannel>> CreateNcclChannel(const pb::Plan&, MPI_Comm,
                                                               AbortPoller, absl::Duration, Device&,
                                                               int, const std::string&) {
  return absl::FailedPreconditionError(
      "runtime.transport NCCL is not built into this program: NCCL (nccl.h, libnccl) was not "
      "found when gpipe was built (set NCCL_ROOT and rebuild); runtime { transport: MPI } runs "
      "on this build");
}

}  // namespace gpipe

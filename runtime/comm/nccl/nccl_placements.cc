#include "runtime/comm/nccl/nccl_placements.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace gpipe {

absl::Status CheckDistinctGpus(std::span<const std::string> placements) {
  absl::flat_hash_map<std::string, int> first_rank;
  for (int rank = 0; rank < static_cast<int>(placements.size()); ++rank) {
    const auto [it, inserted] = first_rank.emplace(placements[rank], rank);
    if (inserted) continue;
    return absl::FailedPreconditionError(absl::StrCat(
        "runtime.transport: NCCL needs a GPU of its own for every rank, but ranks ", it->second,
        " and ", rank, " both compute on ", placements[rank],
        " (NCCL refuses two ranks of one communicator on one GPU); use runtime { transport: MPI }, "
        "which stages boundary tensors through host memory and lets ranks share GPUs "
        "(runtime.cuda.share_gpu), or give each rank its own GPU"));
  }
  return absl::OkStatus();
}

}  // namespace gpipe

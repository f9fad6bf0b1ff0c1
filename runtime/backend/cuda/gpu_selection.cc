#include "runtime/backend/cuda/gpu_selection.h"

#include "absl/strings/str_cat.h"
#include "runtime/comm/mpi_status.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

std::string DescribeVariable(const std::optional<std::string>& value) {
  return value.has_value() ? absl::StrCat("CUDA_VISIBLE_DEVICES=", *value)
                           : std::string("CUDA_VISIBLE_DEVICES unset");
}

}  // namespace

absl::StatusOr<GpuChoice> SelectGpu(const NodeRanks& node, int visible_gpus, bool share_gpu,
                                    const std::optional<std::string>& visible_devices_variable) {
  if (node.local_size < 1 || node.local_rank < 0 || node.local_rank >= node.local_size) {
    return absl::InvalidArgumentError(absl::StrCat("local rank ", node.local_rank, " of ",
                                                   node.local_size, " ranks on host ", node.host,
                                                   " is out of range; a gpipe bug, please report"));
  }
  if (visible_gpus <= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("device: CUDA but no GPU is visible to rank ", node.world_rank, " on host ",
                     node.host, " (", DescribeVariable(visible_devices_variable), ")"));
  }
  const bool shared = node.local_size > visible_gpus;
  if (shared && !share_gpu) {
    return absl::FailedPreconditionError(absl::StrCat(
        "device: CUDA: host ", node.host, " runs ", node.local_size,
        " ranks of this job but they see only ", visible_gpus, " GPU", visible_gpus == 1 ? "" : "s",
        " (", DescribeVariable(visible_devices_variable), "); start at most ", visible_gpus,
        " ranks per node, or set "
        "runtime { cuda { share_gpu: true } } to let ranks share GPUs round-robin"));
  }
  return GpuChoice{.ordinal = node.local_rank % visible_gpus, .shared = shared};
}

absl::StatusOr<NodeRanks> NodeRanksOf(MPI_Comm world) {
  NodeRanks node;
  RETURN_IF_ERROR(MpiStatus(MPI_Comm_rank(world, &node.world_rank), "MPI_Comm_rank"));
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  RETURN_IF_ERROR(MpiStatus(MPI_Get_processor_name(name, &length), "MPI_Get_processor_name"));
  node.host.assign(name, length);
  MPI_Comm local = MPI_COMM_NULL;
  RETURN_IF_ERROR(MpiStatus(
      MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, node.world_rank, MPI_INFO_NULL, &local),
      "MPI_Comm_split_type (the ranks of this node)"));
  // The node's communicator is needed only for these two numbers.
  const absl::Status rank = MpiStatus(MPI_Comm_rank(local, &node.local_rank), "MPI_Comm_rank");
  const absl::Status size = MpiStatus(MPI_Comm_size(local, &node.local_size), "MPI_Comm_size");
  const absl::Status freed = MpiStatus(MPI_Comm_free(&local), "MPI_Comm_free");
  RETURN_IF_ERROR(rank);
  RETURN_IF_ERROR(size);
  RETURN_IF_ERROR(freed);
  return node;
}

}  // namespace gpipe

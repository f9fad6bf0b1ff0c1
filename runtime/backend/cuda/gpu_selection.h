// Which GPU a rank of a `device: CUDA` job computes on. Ranks on one node (those sharing memory,
// found through MPI) take GPUs round-robin by their node-local rank; more ranks than GPUs is an
// error unless runtime.cuda.share_gpu allows it. SelectGpu is the whole decision as a pure
// function (unit-tested without a GPU); NodeRanksOf is the thin MPI part that feeds it.
#ifndef GPIPE_RUNTIME_BACKEND_CUDA_GPU_SELECTION_H_
#define GPIPE_RUNTIME_BACKEND_CUDA_GPU_SELECTION_H_

#include <mpi.h>

#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace gpipe {

// Where a rank runs, for choosing its GPU and for saying so in messages.
struct NodeRanks {
  int world_rank = 0;
  std::string host;    // MPI's processor name
  int local_rank = 0;  // this rank's index among the ranks of its node
  int local_size = 1;  // how many ranks of the job run on its node
};

struct GpuChoice {
  int ordinal = 0;      // the CUDA device id, in [0, visible GPUs)
  bool shared = false;  // other ranks of the node use GPUs too, some the same one
};

// The GPU of local rank `node.local_rank` of `node.local_size` when the node shows
// `visible_gpus` GPUs: local_rank % visible_gpus. FAILED_PRECONDITION when no GPU is visible
// ("device: CUDA but no GPU is visible to rank R on host H (CUDA_VISIBLE_DEVICES=...)"), and
// when the node has more ranks than GPUs and `share_gpu` is false (saying how many of each
// and that runtime.cuda.share_gpu allows it). `visible_devices_variable` is the process's
// CUDA_VISIBLE_DEVICES (nullopt: unset), quoted in the messages only.
absl::StatusOr<GpuChoice> SelectGpu(const NodeRanks& node, int visible_gpus, bool share_gpu,
                                    const std::optional<std::string>& visible_devices_variable);

// This rank's place among the ranks of `world` on its node (MPI_COMM_TYPE_SHARED). Collective
// over `world`: every rank must call it.
absl::StatusOr<NodeRanks> NodeRanksOf(MPI_Comm world);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_BACKEND_CUDA_GPU_SELECTION_H_

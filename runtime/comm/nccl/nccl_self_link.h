// NcclSelfLink: a rank's transfers to itself over a one-rank NCCL communicator, for a peer list
// that names the rank itself. No plan does today (interleaved schedules need two stages or more,
// so a stage's neighbours are other ranks); it is the part of the point-to-point path that one
// GPU can run, and the channel's tests run it. NCCL runs a send to oneself only in one group with
// its receive, so the side posted first waits here, matched by key as MPI matches by tag, until the
// other is posted; then both are issued as one group and both handles follow it. A key posted
// twice on one side, or a pair whose dtypes or shapes differ, fails naming both. Internal to
// comm/nccl. Thread-compatible.
#ifndef GPIPE_RUNTIME_COMM_NCCL_NCCL_SELF_LINK_H_
#define GPIPE_RUNTIME_COMM_NCCL_NCCL_SELF_LINK_H_

#include <cuda_runtime_api.h>

#include <memory>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/comm/data_channel.h"
#include "runtime/comm/nccl/nccl_communicator.h"
#include "runtime/core/tensor.h"

namespace gpipe {

class NcclSelfLink {
 public:
  // `communicator` has one rank; `issue_timeout` bounds each group's issue.
  NcclSelfLink(std::shared_ptr<NcclCommunicator> communicator, cudaStream_t compute_stream,
               int rank, absl::Duration issue_timeout)
      : communicator_(std::move(communicator)),
        compute_stream_(compute_stream),
        rank_(rank),
        issue_timeout_(issue_timeout) {}

  absl::StatusOr<std::unique_ptr<TransferHandle>> Send(const Tensor& tensor,
                                                       const TransferKey& key);
  absl::StatusOr<std::unique_ptr<TransferHandle>> Recv(Tensor& tensor, const TransferKey& key);

  // One side of a transfer: waiting for its other side, then following the issued group.
  struct Side {
    Tensor tensor;
    std::string description;
    std::shared_ptr<TransferHandle> issued;  // shared by both sides once issued
    absl::Status failure;                    // set when it failed before issue
  };

 private:
  // step, micro-batch, chunk, kind, skip layer
  using Key = std::tuple<int64_t, int32_t, int32_t, int32_t, int32_t>;
  static Key KeyOf(const TransferKey& key);
  absl::StatusOr<std::unique_ptr<TransferHandle>> Post(const Tensor& tensor, const TransferKey& key,
                                                       bool sending);
  absl::Status Issue(Side& send, Side& recv);

  std::shared_ptr<NcclCommunicator> communicator_;
  cudaStream_t compute_stream_;
  int rank_;
  absl::Duration issue_timeout_;
  absl::flat_hash_map<Key, std::shared_ptr<Side>> waiting_sends_;
  absl::flat_hash_map<Key, std::shared_ptr<Side>> waiting_receives_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COMM_NCCL_NCCL_SELF_LINK_H_

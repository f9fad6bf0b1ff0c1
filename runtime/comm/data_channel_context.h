// DataChannelContext: what an MPI-based channel (MpiDataChannel, the NCCL channel's bootstrap, the
// SIM backend's headers-only channel) shares with the transfer handles it gives out: its private
// communicator, the abort poller, the clock and the requests abandoned after failures. Shared
// ownership, so a handle that outlives its channel stays safe.
// Thread-compatible: one thread drives the channel and its handles.
#ifndef GPIPE_RUNTIME_COMM_DATA_CHANNEL_CONTEXT_H_
#define GPIPE_RUNTIME_COMM_DATA_CHANNEL_CONTEXT_H_

#include <mpi.h>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "runtime/comm/clock.h"
#include "runtime/comm/data_channel.h"
#include "runtime/comm/orphaned_requests.h"
#include "runtime/comm/wait.h"
#include "runtime/core/dtype.h"
#include "runtime/core/tensor.h"

namespace gpipe {

class MpiRecvHandle;

struct DataChannelContext {
  DataChannelContext(MPI_Comm comm, int rank, int size, int tag_ub, AbortPoller abort_poller,
                     const Clock* clock)
      : comm(comm),
        rank(rank),
        size(size),
        tag_ub(tag_ub),
        abort_poller(std::move(abort_poller)),
        external_clock(clock) {}
  DataChannelContext(const DataChannelContext&) = delete;
  DataChannelContext& operator=(const DataChannelContext&) = delete;
  ~DataChannelContext();

  const Clock& clock() const { return external_clock != nullptr ? *external_clock : real_clock; }
  // Receive handles whose payload receive waits for its header: every wait of the channel
  // (send or receive) polls them all, so a posted receive always progresses — as a plain
  // MPI_Irecv would — and a peer's send never stalls behind a receive nobody is waiting on.
  void AddPendingReceive(MpiRecvHandle* handle) { pending_receives.insert(handle); }
  void RemovePendingReceive(MpiRecvHandle* handle) { pending_receives.erase(handle); }
  void ProgressPendingReceives();

  // Cancels what is still active in `requests` (unless `collective`) and keeps `buffers` alive
  // until MPI lets go of them.
  void Abandon(std::span<MPI_Request> requests, std::shared_ptr<const void> buffers,
               bool collective = false);

  MPI_Comm comm;
  int rank;
  int size;
  int tag_ub;
  AbortPoller abort_poller;
  const Clock* external_clock;
  RealClock real_clock;
  OrphanedRequests orphans;
  absl::flat_hash_set<MpiRecvHandle*> pending_receives;
};

// The MPI datatype of one element of `dtype`.
MPI_Datatype MpiElementType(DType dtype);

// The MPI tags of one transfer's two messages.
struct TransferTags {
  int header = 0;
  int payload = 0;
};

// Checks what every transfer needs — a defined host tensor whose element count fits an MPI count
// and whose rank a transfer header can carry, a peer in the channel, a key that fits the tag
// space — and returns its tags. `description` ("rank 2 sending ... to rank 3") prefixes errors.
absl::StatusOr<TransferTags> PrepareTransfer(const DataChannelContext& context,
                                             const Tensor& tensor, int peer, const TransferKey& key,
                                             const std::string& description);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COMM_DATA_CHANNEL_CONTEXT_H_

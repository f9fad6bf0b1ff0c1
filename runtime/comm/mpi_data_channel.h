// MpiDataChannel: the DataChannel over MPI point-to-point on a private duplicate of the world
// communicator (host tensors). A transfer is a fixed-size header then the payload, tagged by
// (kind, micro-batch, chunk) so receives may be posted in any order; the receiver checks the
// header (step, micro-batch, chunk, kind, dtype, shape, sender) and a mismatch names both sides.
// Every wait polls `abort_poller` (normally ControlChannel::PollAbort), so a job abort ends it.
// Thread-compatible: one thread drives the channel, its handles and all other MPI objects.
#ifndef GPIPE_RUNTIME_COMM_MPI_DATA_CHANNEL_H_
#define GPIPE_RUNTIME_COMM_MPI_DATA_CHANNEL_H_

#include <mpi.h>

#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/comm/clock.h"
#include "runtime/comm/data_channel.h"
#include "runtime/comm/data_channel_context.h"
#include "runtime/comm/mpi_group_setup.h"
#include "runtime/comm/wait.h"

namespace gpipe {

class MpiDataChannel final : public DataChannel {
 public:
  // Collective over `world`: every rank must call it. `abort_poller` may be empty (no aborts);
  // `clock` (nullable: real time) must outlive the channel and its handles.
  static absl::StatusOr<std::unique_ptr<MpiDataChannel>> Create(
      MPI_Comm world, AbortPoller abort_poller, const Clock* clock,
      absl::Duration setup_timeout = absl::Minutes(5));

  MpiDataChannel(const MpiDataChannel&) = delete;
  MpiDataChannel& operator=(const MpiDataChannel&) = delete;
  ~MpiDataChannel() override = default;

  absl::StatusOr<std::unique_ptr<TransferHandle>> Send(const Tensor& tensor, int peer_rank,
                                                       const TransferKey& key) override;
  absl::StatusOr<std::unique_ptr<TransferHandle>> Recv(Tensor& tensor, int peer_rank,
                                                       const TransferKey& key) override;
  // See DataChannel; reductions run on the group's own communicator (MpiReduceGroup).
  absl::StatusOr<std::unique_ptr<ReduceGroup>> CreateReduceGroup(
      std::span<const int> group_ranks, std::vector<std::vector<int64_t>> buckets,
      absl::Time deadline) override;

  int rank() const { return context_->rank; }
  int size() const { return context_->size; }
  // MPI requests given up on after failures (or destroyed handles) that MPI still holds; their
  // buffers are kept alive. Releases the ones MPI has finished with first.
  int abandoned_requests() {
    context_->orphans.Reap();
    return context_->orphans.size();
  }

 private:
  explicit MpiDataChannel(std::shared_ptr<DataChannelContext> context)
      : context_(context), group_setup_(std::move(context)) {}

  std::shared_ptr<DataChannelContext> context_;
  MpiGroupSetup group_setup_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COMM_MPI_DATA_CHANNEL_H_

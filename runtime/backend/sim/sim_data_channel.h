// SimDataChannel: the data channel of a simulated device, on a private duplicate of the world
// communicator. Point-to-point transfers carry the header only (key, dtype, shape, still checked
// by the receiver; sim_header_transfer.h) and complete no earlier than the link model's time for
// the payload's bytes after their post. A reduce group's buckets move no data and run on the link
// beside the compute: each completes a ring all-reduce's time (a reduce-scatter's or
// all-gather's: half of it) from the link model after it starts, or after the group's previous
// bucket completes (one link), without occupying the device, so they overlap the backward as on a
// real accelerator. Approximation: the members do not wait for each other inside the all-reduce
// (the step's gradient-sync barrier, which follows, aligns them). Every rank of the job must use
// it. Thread-compatible.
#ifndef GPIPE_RUNTIME_BACKEND_SIM_SIM_DATA_CHANNEL_H_
#define GPIPE_RUNTIME_BACKEND_SIM_SIM_DATA_CHANNEL_H_

#include <mpi.h>

#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/backend/sim/sim_header_transfer.h"
#include "runtime/comm/data_channel.h"
#include "runtime/comm/data_channel_context.h"
#include "runtime/comm/wait.h"
#include "runtime/estimate/sim_costs.h"

namespace gpipe {

class SimDataChannel final : public DataChannel {
 public:
  // Collective over `world`: every rank must call it. `abort_poller` may be empty (no aborts).
  static absl::StatusOr<std::unique_ptr<SimDataChannel>> Create(MPI_Comm world,
                                                                AbortPoller abort_poller,
                                                                absl::Duration setup_timeout,
                                                                SimCosts costs);

  SimDataChannel(const SimDataChannel&) = delete;
  SimDataChannel& operator=(const SimDataChannel&) = delete;
  ~SimDataChannel() override = default;

  absl::StatusOr<std::unique_ptr<TransferHandle>> Send(const Tensor& tensor, int peer_rank,
                                                       const TransferKey& key) override;
  absl::StatusOr<std::unique_ptr<TransferHandle>> Recv(Tensor& tensor, int peer_rank,
                                                       const TransferKey& key) override;
  absl::StatusOr<std::unique_ptr<ReduceGroup>> CreateReduceGroup(
      std::span<const int> group_ranks, std::vector<std::vector<int64_t>> buckets,
      absl::Time deadline) override;

 private:
  SimDataChannel(std::shared_ptr<DataChannelContext> context, SimCosts costs);

  std::shared_ptr<DataChannelContext> context_;
  SimCosts costs_;
  TransferTimeModel transfer_time_;  // costs_.Transfer
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_BACKEND_SIM_SIM_DATA_CHANNEL_H_

// SimDataChannel: the data channel of a simulated device. Point-to-point transfers go through
// the wrapped channel (an MpiDataChannel in headers-only mode, whose handles complete no earlier
// than the modelled link time, see MpiDataChannelOptions). A reduce group's buckets move no data
// and run on the link beside the compute: each completes a ring all-reduce's time (from the link
// model) after it starts, or after the group's previous bucket completes (one link), without
// occupying the device, so they overlap the backward as on a real accelerator. Approximation:
// the members do not wait for each other inside the all-reduce (the step's gradient-sync
// barrier, which follows, aligns them). Thread-compatible.
#ifndef GPIPE_RUNTIME_DEVICE_SIM_SIM_DATA_CHANNEL_H_
#define GPIPE_RUNTIME_DEVICE_SIM_SIM_DATA_CHANNEL_H_

#include <memory>
#include <vector>

#include "runtime/comm/data_channel.h"
#include "runtime/device/sim/sim_costs.h"
#include "runtime/device/sim/sim_device.h"

namespace gpipe {

class SimDataChannel final : public DataChannel {
 public:
  // `device` must outlive the channel.
  SimDataChannel(std::unique_ptr<DataChannel> transport, SimDevice& device, SimCosts costs)
      : transport_(std::move(transport)), device_(device), costs_(std::move(costs)) {}

  absl::StatusOr<std::unique_ptr<TransferHandle>> Send(const Tensor& tensor, int peer_rank,
                                                       const TransferKey& key) override {
    return transport_->Send(tensor, peer_rank, key);
  }
  absl::StatusOr<std::unique_ptr<TransferHandle>> Recv(Tensor& tensor, int peer_rank,
                                                       const TransferKey& key) override {
    return transport_->Recv(tensor, peer_rank, key);
  }
  absl::StatusOr<std::unique_ptr<ReduceGroup>> CreateReduceGroup(
      std::span<const int> group_ranks, std::vector<std::vector<int64_t>> buckets,
      absl::Time deadline) override;

 private:
  std::unique_ptr<DataChannel> transport_;
  SimDevice& device_;
  SimCosts costs_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_SIM_SIM_DATA_CHANNEL_H_

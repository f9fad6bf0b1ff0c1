// HostStagedDataChannel: a DataChannel for a Device whose memory the host cannot read (a GPU),
// over a channel that moves host tensors (MpiDataChannel). Send copies the device tensor into
// host staging memory (Device::host_staging, pinned on a GPU) after all work issued before it,
// and sends that. Recv receives into host staging memory and copies into the device tensor
// exactly once, when the inner transfer completes (in the handle's Done() or Wait()): until
// then the device tensor is untouched, and after a failed transfer it stays untouched.
// A reduce group stages each bucket to the host, reduces there and copies the sums back.
// Device-generic: it uses only the Device interface. Thread-compatible, like every channel.
#ifndef GPIPE_RUNTIME_COMM_HOST_STAGED_DATA_CHANNEL_H_
#define GPIPE_RUNTIME_COMM_HOST_STAGED_DATA_CHANNEL_H_

#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/comm/data_channel.h"
#include "runtime/device/device.h"

namespace gpipe {

class HostStagedDataChannel final : public DataChannel {
 public:
  // `device` owns the tensors passed in and must outlive the channel and its handles.
  HostStagedDataChannel(std::unique_ptr<DataChannel> host_channel, Device& device)
      : host_channel_(std::move(host_channel)), device_(device) {}

  absl::StatusOr<std::unique_ptr<TransferHandle>> Send(const Tensor& tensor, int peer_rank,
                                                       const TransferKey& key) override;
  absl::StatusOr<std::unique_ptr<TransferHandle>> Recv(Tensor& tensor, int peer_rank,
                                                       const TransferKey& key) override;
  // Each start stages the bucket to the host and its handle copies the sums back when done; a
  // group of one rank sums nothing and copies nothing.
  absl::StatusOr<std::unique_ptr<ReduceGroup>> CreateReduceGroup(
      std::span<const int> group_ranks, std::vector<std::vector<int64_t>> buckets,
      absl::Time deadline) override;

 private:
  std::unique_ptr<DataChannel> host_channel_;
  Device& device_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COMM_HOST_STAGED_DATA_CHANNEL_H_

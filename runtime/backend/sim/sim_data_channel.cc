#include "runtime/backend/sim/sim_data_channel.h"

#include "absl/strings/str_cat.h"
#include "runtime/comm/clock.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/reduce_group.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

// Done once the modelled link time has passed.
class SimReduceHandle final : public TransferHandle {
 public:
  explicit SimReduceHandle(absl::Time done_at) : done_at_(done_at) {}
  bool Done() override { return absl::Now() >= done_at_; }
  absl::Status Wait(absl::Time deadline) override {
    if (Done()) return absl::OkStatus();
    if (done_at_ > deadline) {
      absl::SleepFor(deadline - absl::Now());
      return absl::DeadlineExceededError(absl::StrCat("sim: a bucket all-reduce ends ",
                                                      absl::FormatDuration(done_at_ - deadline),
                                                      " after the deadline"));
    }
    absl::SleepFor(done_at_ - absl::Now());
    return absl::OkStatus();
  }

 private:
  absl::Time done_at_;
};

class SimReduceGroup final : public ReduceGroup {
 public:
  SimReduceGroup(ReduceGroupLayout layout, int ranks, SimCosts costs)
      : layout_(std::move(layout)), ranks_(ranks), costs_(std::move(costs)) {}

  absl::StatusOr<std::unique_ptr<TransferHandle>> StartCollective(
      Collective collective, int bucket, std::span<Tensor> tensors) override {
    RETURN_IF_ERROR(layout_.Advance(collective, bucket, tensors,
                                    absl::StrCat("sim: a bucket ", CollectiveName(collective))));
    const int64_t bytes = layout_.BucketElements(bucket) * static_cast<int64_t>(sizeof(float));
    const absl::Duration time = collective == Collective::kAllReduce
                                    ? costs_.AllReduce(bytes, ranks_)
                                    : costs_.RingPass(bytes, ranks_);
    link_free_ = std::max(link_free_, absl::Now()) + time;
    return std::unique_ptr<TransferHandle>(std::make_unique<SimReduceHandle>(link_free_));
  }
  const std::vector<std::vector<int64_t>>& buckets() const override { return layout_.buckets(); }

 private:
  ReduceGroupLayout layout_;
  int ranks_;
  SimCosts costs_;
  absl::Time link_free_ = absl::InfinitePast();
};

}  // namespace

absl::StatusOr<std::unique_ptr<SimDataChannel>> SimDataChannel::Create(MPI_Comm world,
                                                                       AbortPoller abort_poller,
                                                                       absl::Duration setup_timeout,
                                                                       SimCosts costs) {
  RealClock clock;
  ASSIGN_OR_RETURN(PrivateCommunicator private_comm,
                   CreatePrivateCommunicator(world, clock.Now() + setup_timeout, abort_poller,
                                             clock, "data channel"));
  auto context = std::make_shared<DataChannelContext>(
      private_comm.comm, private_comm.rank, private_comm.size, private_comm.tag_upper_bound,
      std::move(abort_poller), /*clock=*/nullptr);
  return std::unique_ptr<SimDataChannel>(new SimDataChannel(std::move(context), std::move(costs)));
}

SimDataChannel::SimDataChannel(std::shared_ptr<DataChannelContext> context, SimCosts costs)
    : context_(std::move(context)),
      costs_(std::move(costs)),
      transfer_time_([this](int64_t bytes) { return costs_.Transfer(bytes); }) {}

absl::StatusOr<std::unique_ptr<TransferHandle>> SimDataChannel::Send(const Tensor& tensor,
                                                                     int peer_rank,
                                                                     const TransferKey& key) {
  ASSIGN_OR_RETURN(std::unique_ptr<SimHeaderSendHandle> handle,
                   SimHeaderSendHandle::Start(context_, tensor, peer_rank, key, transfer_time_));
  return std::unique_ptr<TransferHandle>(std::move(handle));
}

absl::StatusOr<std::unique_ptr<TransferHandle>> SimDataChannel::Recv(Tensor& tensor, int peer_rank,
                                                                     const TransferKey& key) {
  ASSIGN_OR_RETURN(std::unique_ptr<SimHeaderRecvHandle> handle,
                   SimHeaderRecvHandle::Start(context_, tensor, peer_rank, key, transfer_time_));
  return std::unique_ptr<TransferHandle>(std::move(handle));
}

absl::StatusOr<std::unique_ptr<ReduceGroup>> SimDataChannel::CreateReduceGroup(
    std::span<const int> group_ranks, std::vector<std::vector<int64_t>> buckets, absl::Time) {
  ASSIGN_OR_RETURN(ReduceGroupLayout layout, ReduceGroupLayout::Create(std::move(buckets)));
  return std::unique_ptr<ReduceGroup>(std::make_unique<SimReduceGroup>(
      std::move(layout), static_cast<int>(group_ranks.size()), costs_));
}

}  // namespace gpipe

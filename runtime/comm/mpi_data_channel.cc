#include "runtime/comm/mpi_data_channel.h"

#include "runtime/comm/communicator.h"
#include "runtime/comm/mpi_recv_handle.h"
#include "runtime/comm/mpi_reduce_group.h"
#include "runtime/comm/mpi_send_handle.h"
#include "runtime/comm/mpi_status.h"
#include "runtime/core/status_macros.h"

namespace gpipe {

absl::StatusOr<std::unique_ptr<MpiDataChannel>> MpiDataChannel::Create(
    MPI_Comm world, AbortPoller abort_poller, const Clock* clock, absl::Duration setup_timeout) {
  RealClock real_clock;
  const Clock& time = clock != nullptr ? *clock : real_clock;
  ASSIGN_OR_RETURN(PrivateCommunicator private_comm,
                   CreatePrivateCommunicator(world, time.Now() + setup_timeout, abort_poller, time,
                                             "data channel"));
  auto context = std::make_shared<DataChannelContext>(
      private_comm.comm, private_comm.rank, private_comm.size, private_comm.tag_upper_bound,
      std::move(abort_poller), clock);
  return std::unique_ptr<MpiDataChannel>(new MpiDataChannel(std::move(context)));
}

absl::StatusOr<std::unique_ptr<TransferHandle>> MpiDataChannel::Send(const Tensor& tensor,
                                                                     int peer_rank,
                                                                     const TransferKey& key) {
  ASSIGN_OR_RETURN(std::unique_ptr<MpiSendHandle> handle,
                   MpiSendHandle::Start(context_, tensor, peer_rank, key));
  return std::unique_ptr<TransferHandle>(std::move(handle));
}

absl::StatusOr<std::unique_ptr<TransferHandle>> MpiDataChannel::Recv(Tensor& tensor, int peer_rank,
                                                                     const TransferKey& key) {
  ASSIGN_OR_RETURN(std::unique_ptr<MpiRecvHandle> handle,
                   MpiRecvHandle::Start(context_, tensor, peer_rank, key));
  return std::unique_ptr<TransferHandle>(std::move(handle));
}

absl::StatusOr<std::unique_ptr<ReduceGroup>> MpiDataChannel::CreateReduceGroup(
    std::span<const int> group_ranks, std::vector<std::vector<int64_t>> buckets,
    absl::Time deadline) {
  return MpiReduceGroup::Create(context_, group_setup_, group_ranks, std::move(buckets), deadline);
}

}  // namespace gpipe

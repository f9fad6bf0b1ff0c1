#include "runtime/comm/nccl/nccl_data_channel.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/nccl/nccl_bootstrap.h"
#include "runtime/comm/nccl/nccl_placements.h"
#include "runtime/comm/nccl/nccl_reduce_group.h"
#include "runtime/comm/nccl/nccl_transfer.h"
#include "runtime/comm/transfer_header.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/cuda/cuda_status.h"

namespace gpipe {
namespace {

// What a transfer keeps until its stream is through with it.
struct TransferResources {
  Tensor payload;
  Tensor header_device;
  Tensor header_host;
};

// Header buffers for a transfer: pinned host memory the host reads or writes, device memory NCCL
// moves.
absl::Status AllocateHeader(Device& device, TransferResources& resources) {
  ASSIGN_OR_RETURN(resources.header_host, Tensor::Empty(device.host_staging(), Shape{kHeaderWords},
                                                        DType::kI64, MemoryKind::kBoundary));
  ASSIGN_OR_RETURN(resources.header_device,
                   Tensor::Empty(device, Shape{kHeaderWords}, DType::kI64, MemoryKind::kBoundary));
  return absl::OkStatus();
}

// link.Issue; when it fails after part of the transfer was queued, the transfer's memory is kept
// until the stream is past it.
absl::Status IssueKeeping(NcclCommunicator& link,
                          const std::shared_ptr<TransferResources>& resources,
                          absl::FunctionRef<ncclResult_t()> operations, absl::Time deadline,
                          const std::string& description) {
  const absl::Status status = link.Issue(operations, deadline);
  if (status.ok()) return status;
  if (absl::StatusOr<cuda::Event> queued = link.Record(); queued.ok()) {
    link.Abandon(*std::move(queued), resources);
  }
  return WithContext(status, description);
}

absl::Status CheckDeviceTensor(const Tensor& tensor, const std::string& description) {
  if (!tensor.defined()) {
    return absl::InvalidArgumentError(absl::StrCat(description, ": the tensor is undefined"));
  }
  if (tensor.allocator().host_accessible()) {
    return absl::FailedPreconditionError(
        absl::StrCat(description, ": NCCL moves device tensors; this one is in host memory"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<NcclDataChannel>> NcclDataChannel::Create(
    MPI_Comm world, AbortPoller abort_poller, const Clock* clock, NcclDataChannelOptions options) {
  if (options.device == nullptr || options.compute_stream == nullptr) {
    return absl::InvalidArgumentError("NcclDataChannel needs a CUDA device and its stream");
  }
  RealClock real_clock;
  const Clock& time = clock != nullptr ? *clock : real_clock;
  const absl::Time deadline = time.Now() + options.setup_timeout;
  ASSIGN_OR_RETURN(
      PrivateCommunicator private_comm,
      CreatePrivateCommunicator(world, deadline, abort_poller, time, "NCCL data channel"));
  auto context = std::make_shared<DataChannelContext>(
      private_comm.comm, private_comm.rank, private_comm.size, private_comm.tag_upper_bound,
      std::move(abort_poller), clock);
  std::sort(options.peers.begin(), options.peers.end());
  options.peers.erase(std::unique(options.peers.begin(), options.peers.end()), options.peers.end());
  std::unique_ptr<NcclDataChannel> channel(new NcclDataChannel(context, std::move(options)));
  RETURN_IF_ERROR(channel->CheckPlacements(deadline));
  // In ascending order of the pair (lower rank, higher rank) on every rank: the set-up of one
  // pair never waits on a rank busy with a later pair.
  for (const int peer : channel->options_.peers) {
    RETURN_IF_ERROR(channel->Connect(peer, deadline));
  }
  return channel;
}

NcclCommunicator::Options NcclDataChannel::CommunicatorOptions(std::string description) const {
  return NcclCommunicator::Options{.description = std::move(description),
                                   .abort_poller = context_->abort_poller,
                                   .clock = context_->external_clock};
}

absl::Status NcclDataChannel::CheckPlacements(absl::Time deadline) {
  ASSIGN_OR_RETURN(const std::vector<std::string> placements,
                   GatherPlacements(*context_, options_.placement, deadline));
  return CheckDistinctGpus(placements);
}

absl::Status NcclDataChannel::Connect(int peer, absl::Time deadline) {
  const int rank = context_->rank;
  if (peer < 0 || peer >= context_->size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, ": NCCL peer rank ", peer,
                                                   " is outside the job (ranks 0..",
                                                   context_->size - 1, ")"));
  }
  if (peer == rank) {
    const std::string description = absl::StrCat("rank ", rank, "'s NCCL link to itself");
    ASSIGN_OR_RETURN(const ncclUniqueId id,
                     ShareUniqueId(*context_, {rank}, deadline, description));
    ASSIGN_OR_RETURN(
        std::shared_ptr<NcclCommunicator> communicator,
        NcclCommunicator::Create(id, 1, 0, deadline, CommunicatorOptions(description)));
    self_ = std::make_unique<NcclSelfLink>(std::move(communicator), options_.compute_stream, rank,
                                           options_.setup_timeout);
    return absl::OkStatus();
  }
  // One communicator per direction, the lower rank's outgoing one first on both ranks.
  const int low = std::min(rank, peer);
  const int high = std::max(rank, peer);
  const int member = rank == low ? 0 : 1;
  for (const auto& [from, to] : {std::pair(low, high), std::pair(high, low)}) {
    const std::string description = absl::StrCat("the NCCL link from rank ", from, " to rank ", to);
    ASSIGN_OR_RETURN(const ncclUniqueId id,
                     ShareUniqueId(*context_, {low, high}, deadline, description));
    ASSIGN_OR_RETURN(
        std::shared_ptr<NcclCommunicator> communicator,
        NcclCommunicator::Create(id, 2, member, deadline, CommunicatorOptions(description)));
    const bool sending = from == rank;
    RETURN_IF_ERROR(ConnectNow(
        communicator,
        [&](float* probe) {
          return sending ? ncclSend(probe, 1, ncclFloat32, 1 - member, communicator->comm(),
                                    communicator->stream())
                         : ncclRecv(probe, 1, ncclFloat32, 1 - member, communicator->comm(),
                                    communicator->stream());
        },
        deadline));
    (sending ? outgoing_ : incoming_).emplace(peer, std::move(communicator));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<NcclCommunicator>> NcclDataChannel::LinkTo(
    int peer, bool sending, const std::string& description) const {
  const auto& links = sending ? outgoing_ : incoming_;
  auto link = links.find(peer);
  if (link == links.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat(description, ": rank ", context_->rank, " has no NCCL link to rank ", peer,
                     " (links made at set-up: [", absl::StrJoin(options_.peers, ", "), "])"));
  }
  return link->second;
}

absl::StatusOr<std::unique_ptr<TransferHandle>> NcclDataChannel::Send(const Tensor& tensor,
                                                                      int peer_rank,
                                                                      const TransferKey& key) {
  const std::string description = absl::StrCat("rank ", context_->rank, " sending ",
                                               Describe(key, tensor.dtype(), tensor.shape()),
                                               " to rank ", peer_rank, " over NCCL");
  RETURN_IF_ERROR(CheckDeviceTensor(tensor, description));
  if (peer_rank == context_->rank && self_ != nullptr) return self_->Send(tensor, key);
  ASSIGN_OR_RETURN(const std::shared_ptr<NcclCommunicator> link,
                   LinkTo(peer_rank, /*sending=*/true, description));
  ASSIGN_OR_RETURN(
      const HeaderWords words,
      EncodeHeader(TransferHeader{
          .key = key, .dtype = tensor.dtype(), .shape = tensor.shape(), .sender = context_->rank}));
  auto resources = std::make_shared<TransferResources>();
  resources->payload = tensor;
  RETURN_IF_ERROR(WithContext(AllocateHeader(*options_.device, *resources), description));
  std::copy(words.begin(), words.end(), resources->header_host.data<int64_t>());
  RETURN_IF_ERROR(WithContext(link->After(options_.compute_stream), description));
  GPIPE_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(resources->header_device.raw_data(), resources->header_host.raw_data(),
                      resources->header_host.bytes(), cudaMemcpyHostToDevice, link->stream()));
  const int other = peer_rank < context_->rank ? 0 : 1;  // the peer's index in the link
  const absl::Time deadline = context_->clock().Now() + options_.setup_timeout;
  // The header and the payload are two groups, so the receiver can check the header before it
  // waits for a payload that may not be the one it expects.
  RETURN_IF_ERROR(IssueKeeping(
      *link, resources,
      [&] {
        return ncclSend(resources->header_device.raw_data(), kHeaderWords, ncclInt64, other,
                        link->comm(), link->stream());
      },
      deadline, description));
  RETURN_IF_ERROR(IssueKeeping(
      *link, resources,
      [&] {
        return ncclSend(tensor.raw_data(), static_cast<size_t>(tensor.num_elements()),
                        NcclElementType(tensor.dtype()), other, link->comm(), link->stream());
      },
      deadline, description));
  ASSIGN_OR_RETURN(cuda::Event done, link->Record());
  return std::unique_ptr<TransferHandle>(std::make_unique<NcclTransferHandle>(
      link, std::nullopt, NcclMilestone{std::move(done), {}}, std::move(resources), description));
}

absl::StatusOr<std::unique_ptr<TransferHandle>> NcclDataChannel::Recv(Tensor& tensor, int peer_rank,
                                                                      const TransferKey& key) {
  const TransferHeader expected{
      .key = key, .dtype = tensor.dtype(), .shape = tensor.shape(), .sender = peer_rank};
  const std::string description =
      absl::StrCat("rank ", context_->rank, " receiving ", Describe(expected), " from rank ",
                   peer_rank, " over NCCL");
  RETURN_IF_ERROR(CheckDeviceTensor(tensor, description));
  if (peer_rank == context_->rank && self_ != nullptr) return self_->Recv(tensor, key);
  ASSIGN_OR_RETURN(const std::shared_ptr<NcclCommunicator> link,
                   LinkTo(peer_rank, /*sending=*/false, description));
  RETURN_IF_ERROR(WithContext(EncodeHeader(expected).status(), description));
  auto resources = std::make_shared<TransferResources>();
  resources->payload = tensor;
  RETURN_IF_ERROR(WithContext(AllocateHeader(*options_.device, *resources), description));
  // The memory received into may have been freed by work on the compute stream just before.
  RETURN_IF_ERROR(WithContext(link->After(options_.compute_stream), description));
  const int other = peer_rank < context_->rank ? 0 : 1;  // the peer's index in the link
  const absl::Time deadline = context_->clock().Now() + options_.setup_timeout;
  RETURN_IF_ERROR(IssueKeeping(
      *link, resources,
      [&] {
        return ncclRecv(resources->header_device.raw_data(), kHeaderWords, ncclInt64, other,
                        link->comm(), link->stream());
      },
      deadline, description));
  GPIPE_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(resources->header_host.raw_data(), resources->header_device.raw_data(),
                      resources->header_host.bytes(), cudaMemcpyDeviceToHost, link->stream()));
  ASSIGN_OR_RETURN(cuda::Event header_arrived, link->Record());
  RETURN_IF_ERROR(IssueKeeping(
      *link, resources,
      [&] {
        return ncclRecv(tensor.raw_data(), static_cast<size_t>(tensor.num_elements()),
                        NcclElementType(tensor.dtype()), other, link->comm(), link->stream());
      },
      deadline, description));
  ASSIGN_OR_RETURN(cuda::Event done, link->Record());
  const int rank = context_->rank;
  const int64_t* arrived = resources->header_host.data<int64_t>();
  auto check_header = [expected, arrived, rank, peer_rank, description]() -> absl::Status {
    HeaderWords words;
    std::copy(arrived, arrived + kHeaderWords, words.begin());
    absl::StatusOr<TransferHeader> received = DecodeHeader(words);
    if (!received.ok()) return WithContext(received.status(), description);
    if (SameTransfer(*received, expected) && received->sender == peer_rank) {
      return absl::OkStatus();
    }
    std::string message =
        absl::StrCat("rank ", rank, " expected ", Describe(expected), " from rank ", peer_rank,
                     " but received ", Describe(*received));
    if (received->sender != peer_rank) {
      absl::StrAppend(&message, " claiming to be from rank ", received->sender);
    }
    absl::StrAppend(&message, " (over NCCL)");
    return absl::InvalidArgumentError(message);
  };
  return std::unique_ptr<TransferHandle>(std::make_unique<NcclTransferHandle>(
      link, NcclMilestone{std::move(header_arrived), std::move(check_header)},
      NcclMilestone{std::move(done), {}}, std::move(resources), description));
}

absl::StatusOr<std::unique_ptr<ReduceGroup>> NcclDataChannel::CreateReduceGroup(
    std::span<const int> group_ranks, std::vector<std::vector<int64_t>> buckets,
    absl::Time deadline) {
  if (group_ranks.size() == 1 && group_ranks.front() == context_->rank) {
    return SoloReduceGroup::Create(context_->rank, std::move(buckets));
  }
  ASSIGN_OR_RETURN(
      std::unique_ptr<NcclReduceGroup> group,
      NcclReduceGroup::Create(*context_, group_setup_, options_.compute_stream, group_ranks,
                              std::move(buckets), deadline, options_.setup_timeout));
  return std::unique_ptr<ReduceGroup>(std::move(group));
}

}  // namespace gpipe

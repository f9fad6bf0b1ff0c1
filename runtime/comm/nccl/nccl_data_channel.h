// NcclDataChannel: the DataChannel over NCCL (runtime.transport: NCCL) for device tensors of
// one GPU per rank. Bootstrapped over MPI: at creation every rank checks that no two ranks
// share a GPU (NCCL refuses that; the message names the MPI transport as the alternative), then
// makes, for each pipeline neighbour, one two-rank communicator per direction (unique ids sent
// over MPI by the lower rank) and connects each with a one-element transfer, so nothing is
// created or connected mid-step. Reduce groups (data-parallel replicas, tied parameters) get
// their own communicators the same way, at set-up.
//
// Ordering: each communicator has its own stream, which waits (by event) for everything the
// compute stream issued before a Send or Recv, so a stage computes micro-batch m+1 while m is in
// flight. NCCL matches point-to-point operations by issue order, not by tag, and runs one
// communicator's operations in that order; with one communicator per direction, the n-th send
// from A to B meets the n-th receive B posts from A, and a receive never queues behind a send
// (which, for a large message, waits for its receiver). The executor issues sends and receives
// in program order, and the verifier's per-pair order check (schedule/transfers.h) proves the
// n-th send and receive of each direction are the same transfer on both sides: a receive then
// completes once its send is issued, as under MPI, so any program the verifier's dependency
// model proves to terminate also terminates here (tests/exec/issue_order_channel.h models this).
//
// Each transfer sends its header (the key, dtype, shape and sender, as over MPI) ahead of the
// payload; the receiver checks it as soon as it arrives. A rank's transfers to itself (a peer list
// naming the rank; see nccl_self_link.h) go over a one-rank communicator: NCCL runs such a send
// only grouped with its receive, so whichever side comes first waits in the channel, matched by
// key, until the other is posted. Waits poll the stream and ncclCommGetAsyncError against their
// deadline and the job's abort flag; a failure aborts the communicator, naming rank, peer,
// step, micro-batch and the operation.
//
// Thread-compatible: one thread, with the GPU current, drives the channel and its handles.
#ifndef GPIPE_RUNTIME_COMM_NCCL_NCCL_DATA_CHANNEL_H_
#define GPIPE_RUNTIME_COMM_NCCL_NCCL_DATA_CHANNEL_H_

#include <cuda_runtime_api.h>
#include <mpi.h>

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/comm/clock.h"
#include "runtime/comm/data_channel.h"
#include "runtime/comm/data_channel_context.h"
#include "runtime/comm/mpi_group_setup.h"
#include "runtime/comm/nccl/nccl_communicator.h"
#include "runtime/comm/nccl/nccl_self_link.h"
#include "runtime/comm/wait.h"
#include "runtime/device/device.h"

namespace gpipe {

struct NcclDataChannelOptions {
  // The GPU whose tensors travel (its header buffers come from it too); outlives the channel.
  Device* device = nullptr;
  // The device's compute stream: transfers start after the work issued on it.
  cudaStream_t compute_stream = nullptr;
  // Where this rank computes, compared across ranks: "host node7 GPU 0000:1B:00.0".
  std::string placement;
  // The ranks this rank sends boundary tensors to or receives them from (itself allowed); every
  // such relation must be listed on both ranks.
  std::vector<int> peers;
  // Bounds the creation, and each later communicator set-up or group issue.
  absl::Duration setup_timeout = absl::Minutes(5);
};

class NcclDataChannel final : public DataChannel {
 public:
  // Collective over `world`: every rank calls it. `clock` (nullable: real time) outlives the
  // channel and its handles. FAILED_PRECONDITION when two ranks share a GPU.
  static absl::StatusOr<std::unique_ptr<NcclDataChannel>> Create(MPI_Comm world,
                                                                 AbortPoller abort_poller,
                                                                 const Clock* clock,
                                                                 NcclDataChannelOptions options);
  NcclDataChannel(const NcclDataChannel&) = delete;
  NcclDataChannel& operator=(const NcclDataChannel&) = delete;
  ~NcclDataChannel() override = default;

  // Device tensors only; `peer_rank` must be one of the peers given at creation.
  absl::StatusOr<std::unique_ptr<TransferHandle>> Send(const Tensor& tensor, int peer_rank,
                                                       const TransferKey& key) override;
  absl::StatusOr<std::unique_ptr<TransferHandle>> Recv(Tensor& tensor, int peer_rank,
                                                       const TransferKey& key) override;
  // An NcclReduceGroup (a group of one: SoloReduceGroup).
  absl::StatusOr<std::unique_ptr<ReduceGroup>> CreateReduceGroup(
      std::span<const int> group_ranks, std::vector<std::vector<int64_t>> buckets,
      absl::Time deadline) override;

  int rank() const { return context_->rank; }

 private:
  NcclDataChannel(std::shared_ptr<DataChannelContext> context, NcclDataChannelOptions options)
      : context_(context), group_setup_(std::move(context)), options_(std::move(options)) {}
  absl::Status CheckPlacements(absl::Time deadline);
  absl::Status Connect(int peer, absl::Time deadline);
  absl::StatusOr<std::shared_ptr<NcclCommunicator>> LinkTo(int peer, bool sending,
                                                           const std::string& description) const;
  NcclCommunicator::Options CommunicatorOptions(std::string description) const;

  std::shared_ptr<DataChannelContext> context_;  // the private MPI communicator (bootstrap)
  MpiGroupSetup group_setup_;                    // reduce groups' agreement over MPI
  NcclDataChannelOptions options_;
  // By peer rank: the communicator this rank sends on, and the one it receives on.
  absl::flat_hash_map<int, std::shared_ptr<NcclCommunicator>> outgoing_;
  absl::flat_hash_map<int, std::shared_ptr<NcclCommunicator>> incoming_;
  std::unique_ptr<NcclSelfLink> self_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COMM_NCCL_NCCL_DATA_CHANNEL_H_

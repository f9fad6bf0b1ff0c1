// DataChannel: moves boundary tensors (activations forward, gradients backward) between stage
// ranks, and sums gradients across data-parallel replicas. Implementations: MPI
// (mpi_data_channel.h, host tensors; host_staged_data_channel.h puts device tensors on it) and
// NCCL (nccl/nccl_data_channel.h, GPU tensors); the SIM backend has its own (headers only).
// Transfers are asynchronous: Send/Recv return a handle that completes later; every wait has a
// deadline and gives up early when the job is aborting.
//
// Each transfer carries a header (step, micro-batch, kind, chunk, dtype, shape) that the
// receiver checks against what it expected; a mismatch is an error naming both sides.
// Thread-compatible: one thread drives a channel.
#ifndef GPIPE_RUNTIME_COMM_DATA_CHANNEL_H_
#define GPIPE_RUNTIME_COMM_DATA_CHANNEL_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/core/tensor.h"

namespace gpipe {

enum class TransferKind : int32_t { kActivation = 1, kGradient = 2 };

// Identifies one boundary transfer; sender and receiver must agree on all of it.
struct TransferKey {
  int64_t step = 0;
  int32_t micro_batch = 0;
  int32_t chunk = 0;
  TransferKind kind = TransferKind::kActivation;
  // A skip connection's transfer (plan: skip_add, skip_concat): the join layer (index in
  // model.layers) that reads it; -1 for the pipeline's own boundary.
  int32_t skip_layer = -1;
};

std::string ToString(const TransferKey& key);  // "activation step=3 mb=5"

class TransferHandle {
 public:
  virtual ~TransferHandle() = default;
  // Non-blocking: whether the transfer finished (or failed; Wait then returns why).
  virtual bool Done() = 0;
  // Blocks until done or `deadline`. DEADLINE_EXCEEDED names the peer and key; ABORTED when
  // another rank aborted the job; INVALID_ARGUMENT on a header mismatch.
  virtual absl::Status Wait(absl::Time deadline) = 0;
};

// What a ReduceGroup start does with a bucket's tensors. The members are ordered by rank;
// member m owns ShardRange(n, members, m) (runtime/core/element_range.h) of each tensor of n
// elements.
enum class Collective {
  // Every member's tensors end up holding the elementwise sum over the members.
  kAllReduce,
  // Each member's tensors hold the sum in the elements it owns; their other elements are left
  // unspecified.
  kReduceScatter,
  // Each member's tensors take, in every member's elements, that member's values.
  kAllGather,
};
const char* CollectiveName(Collective collective);  // "all-reduce", "reduce-scatter", ...

// A fixed set of ranks that sum fixed lists of f32 tensors together every step: a stage's
// data-parallel replicas reducing their gradient buckets (and, with the optimizer state sharded,
// gathering the updated parameters). Created once, at set-up, by DataChannel::CreateReduceGroup
// on every member; each step, every member starts the same collectives in the same order
// (collectives on one group are ordered) and each start overlaps whatever the caller does until
// it waits.
class ReduceGroup {
 public:
  virtual ~ReduceGroup() = default;
  // Starts `collective` on bucket `bucket`'s tensors, in place over the group. `tensors` must
  // match the element counts the bucket was created with, stay alive and unread until the handle
  // is done, and be written by no one else meanwhile. Each step, on every member, the reductions
  // (all-reduce or reduce-scatter) start in ascending bucket order, after the previous step's
  // all finished; then the all-gathers of some of the buckets, in ascending order. The handle
  // completes when the result is in `tensors` (for a device whose memory the host cannot read,
  // after the copy back).
  virtual absl::StatusOr<std::unique_ptr<TransferHandle>> StartCollective(
      Collective collective, int bucket, std::span<Tensor> tensors) = 0;
  // StartCollective(kAllReduce, bucket, tensors).
  absl::StatusOr<std::unique_ptr<TransferHandle>> Start(int bucket, std::span<Tensor> tensors) {
    return StartCollective(Collective::kAllReduce, bucket, tensors);
  }
  // The bucket layout it was created with: element counts per tensor, per bucket.
  virtual const std::vector<std::vector<int64_t>>& buckets() const = 0;
};

class DataChannel {
 public:
  virtual ~DataChannel() = default;
  // Sends `tensor` to `peer_rank`. The tensor must stay alive and unmodified until the handle
  // is done (the handle keeps a reference to it).
  virtual absl::StatusOr<std::unique_ptr<TransferHandle>> Send(const Tensor& tensor, int peer_rank,
                                                               const TransferKey& key) = 0;
  // Receives into `tensor` (already allocated with the expected shape and dtype) from
  // `peer_rank`; the header must match `key`, the shape and the dtype. The payload's writes into
  // `tensor` come after the device work issued before the call (on a GPU: ordered after the
  // compute stream), so `tensor` may be memory that earlier work still reads.
  virtual absl::StatusOr<std::unique_ptr<TransferHandle>> Recv(Tensor& tensor, int peer_rank,
                                                               const TransferKey& key) = 0;
  // Collective over `group_ranks` (this rank included, any order): every member calls it with
  // the same ranks and the same `buckets` (element counts per tensor, per bucket); members that
  // disagree fail with both sides' descriptions, a member that never comes fails the others at
  // `deadline`. A group of one rank sums nothing: its handles are done at once.
  virtual absl::StatusOr<std::unique_ptr<ReduceGroup>> CreateReduceGroup(
      std::span<const int> group_ranks, std::vector<std::vector<int64_t>> buckets,
      absl::Time deadline) = 0;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COMM_DATA_CHANNEL_H_

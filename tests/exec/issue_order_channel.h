// IssueOrderHub / IssueOrderChannel: an in-process DataChannel that matches transfers the way
// NcclDataChannel does, for executor tests. Each direction between two ranks is its own queue
// (one NCCL communicator and stream per direction): the n-th send from A to B meets the n-th
// receive B posted from A, whatever their keys; a send and a receive of different keys fail
// both (the verifier's per-pair order check exists to rule that out). A send is done only once
// its receive is posted (a rendezvous, as for NCCL's large messages), so an executor that
// waited on a send before posting what the peer needs would hang here until its deadline. A
// rank's transfers to itself match by key, as NcclSelfLink does. Thread-safe.
#ifndef GPIPE_TESTS_EXEC_ISSUE_ORDER_CHANNEL_H_
#define GPIPE_TESTS_EXEC_ISSUE_ORDER_CHANNEL_H_

#include <deque>
#include <map>
#include <memory>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "runtime/comm/data_channel.h"
#include "runtime/core/tensor.h"

namespace gpipe::testing {

class IssueOrderHub {
 public:
  // What one issued operation shares with its handle.
  struct Operation {
    bool send = false;
    TransferKey key;
    Tensor tensor;  // send: a copy of the payload; receive: where it goes
    bool done = false;
    absl::Status status;
  };

  // Queues `operation`, issued by `rank` towards `peer` (a send) or from `peer` (a receive), and
  // completes what now matches.
  void Issue(int rank, int peer, std::shared_ptr<Operation> operation);
  // Waits until `operation` is done or `deadline`; DEADLINE_EXCEEDED then.
  absl::Status Wait(const Operation& operation, absl::Time deadline);
  bool Done(const Operation& operation);

 private:
  void Progress(int from, int to) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ProgressSelf(int rank) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  // (from, to) -> sends and receives of that direction not yet matched, in issue order.
  std::map<std::pair<int, int>, std::deque<std::shared_ptr<Operation>>> sends_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<int, int>, std::deque<std::shared_ptr<Operation>>> receives_
      ABSL_GUARDED_BY(mu_);
};

class IssueOrderChannel final : public DataChannel {
 public:
  IssueOrderChannel(IssueOrderHub& hub, int rank) : hub_(hub), rank_(rank) {}

  absl::StatusOr<std::unique_ptr<TransferHandle>> Send(const Tensor& tensor, int peer_rank,
                                                       const TransferKey& key) override;
  absl::StatusOr<std::unique_ptr<TransferHandle>> Recv(Tensor& tensor, int peer_rank,
                                                       const TransferKey& key) override;
  // Groups of one rank only.
  absl::StatusOr<std::unique_ptr<ReduceGroup>> CreateReduceGroup(
      std::span<const int> group_ranks, std::vector<std::vector<int64_t>> buckets,
      absl::Time deadline) override;

 private:
  IssueOrderHub& hub_;
  int rank_;
};

}  // namespace gpipe::testing

#endif  // GPIPE_TESTS_EXEC_ISSUE_ORDER_CHANNEL_H_

// LoopbackHub / LoopbackChannel: an in-process DataChannel for executor tests. Stages run on
// threads of one process and exchange deep copies of tensors through a shared hub; a fault
// hook can fail chosen transfers. Thread-safe.
#ifndef GPIPE_TESTS_EXEC_LOOPBACK_CHANNEL_H_
#define GPIPE_TESTS_EXEC_LOOPBACK_CHANNEL_H_

#include <deque>
#include <functional>
#include <map>
#include <tuple>

#include "absl/synchronization/mutex.h"
#include "runtime/comm/data_channel.h"

namespace gpipe::testing {

class LoopbackHub {
 public:
  using Key = std::tuple<int, int, int64_t, int, int, int>;  // from, to, step, mb, chunk, kind
  void Put(const Key& key, Tensor tensor);
  // Takes the tensor for `key`, waiting until `deadline`.
  absl::StatusOr<Tensor> Take(const Key& key, absl::Time deadline);
  bool Has(const Key& key);

 private:
  absl::Mutex mu_;
  std::map<Key, std::deque<Tensor>> messages_ ABSL_GUARDED_BY(mu_);
};

class LoopbackChannel final : public DataChannel {
 public:
  // Returns a non-OK status to fail that Recv (rank, peer, key).
  using FaultHook = std::function<absl::Status(int rank, int peer, const TransferKey& key)>;
  LoopbackChannel(LoopbackHub& hub, int rank, FaultHook fault = nullptr)
      : hub_(hub), rank_(rank), fault_(std::move(fault)) {}

  absl::StatusOr<std::unique_ptr<TransferHandle>> Send(const Tensor& tensor, int peer_rank,
                                                       const TransferKey& key) override;
  absl::StatusOr<std::unique_ptr<TransferHandle>> Recv(Tensor& tensor, int peer_rank,
                                                       const TransferKey& key) override;
  // Groups of one rank only (the loopback hub has no data-parallel replicas).
  absl::StatusOr<std::unique_ptr<ReduceGroup>> CreateReduceGroup(
      std::span<const int> group_ranks, std::vector<std::vector<int64_t>> buckets,
      absl::Time deadline) override;

 private:
  LoopbackHub& hub_;
  int rank_;
  FaultHook fault_;
};

}  // namespace gpipe::testing

#endif  // GPIPE_TESTS_EXEC_LOOPBACK_CHANNEL_H_

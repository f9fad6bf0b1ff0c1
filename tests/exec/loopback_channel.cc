#include "tests/exec/loopback_channel.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/comm/reduce_group.h"

namespace gpipe::testing {
namespace {

LoopbackHub::Key MakeKey(int from, int to, const TransferKey& key) {
  return {from, to, key.step, key.micro_batch, key.chunk, static_cast<int>(key.kind)};
}

class RecvHandle final : public TransferHandle {
 public:
  RecvHandle(LoopbackHub& hub, LoopbackHub::Key key, Tensor destination, absl::Status fault)
      : hub_(hub), key_(key), destination_(std::move(destination)), fault_(std::move(fault)) {}
  bool Done() override { return !fault_.ok() || hub_.Has(key_); }
  absl::Status Wait(absl::Time deadline) override {
    if (!fault_.ok()) return fault_;
    auto tensor = hub_.Take(key_, deadline);
    if (!tensor.ok()) return tensor.status();
    if (tensor->shape() != destination_.shape()) {
      return absl::InvalidArgumentError(absl::StrCat("expected ", destination_.DebugString(),
                                                     " but received ", tensor->DebugString()));
    }
    std::memcpy(destination_.raw_data(), tensor->raw_data(), tensor->bytes());
    return absl::OkStatus();
  }

 private:
  LoopbackHub& hub_;
  LoopbackHub::Key key_;
  Tensor destination_;
  absl::Status fault_;
};

}  // namespace

void LoopbackHub::Put(const Key& key, Tensor tensor) {
  absl::MutexLock lock(&mu_);
  messages_[key].push_back(std::move(tensor));
}

bool LoopbackHub::Has(const Key& key) {
  absl::MutexLock lock(&mu_);
  auto it = messages_.find(key);
  return it != messages_.end() && !it->second.empty();
}

absl::StatusOr<Tensor> LoopbackHub::Take(const Key& key, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto ready = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    auto it = messages_.find(key);
    return it != messages_.end() && !it->second.empty();
  };
  while (!ready()) {
    if (absl::Now() >= deadline) return absl::DeadlineExceededError("loopback receive timed out");
    mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
  }
  Tensor t = std::move(messages_[key].front());
  messages_[key].pop_front();
  return t;
}

absl::StatusOr<std::unique_ptr<TransferHandle>> LoopbackChannel::Send(const Tensor& tensor,
                                                                      int peer_rank,
                                                                      const TransferKey& key) {
  auto copy = tensor.Clone(MemoryKind::kWorkspace);
  if (!copy.ok()) return copy.status();
  hub_.Put(MakeKey(rank_, peer_rank, key), *std::move(copy));
  return std::unique_ptr<TransferHandle>(std::make_unique<CompletedHandle>());
}

absl::StatusOr<std::unique_ptr<TransferHandle>> LoopbackChannel::Recv(Tensor& tensor, int peer_rank,
                                                                      const TransferKey& key) {
  absl::Status fault = fault_ ? fault_(rank_, peer_rank, key) : absl::OkStatus();
  return std::unique_ptr<TransferHandle>(
      new RecvHandle(hub_, MakeKey(peer_rank, rank_, key), tensor, std::move(fault)));
}

absl::StatusOr<std::unique_ptr<ReduceGroup>> LoopbackChannel::CreateReduceGroup(
    std::span<const int> group_ranks, std::vector<std::vector<int64_t>> buckets, absl::Time) {
  if (group_ranks.size() > 1) {
    return absl::UnimplementedError("the loopback channel has no data-parallel replicas");
  }
  return SoloReduceGroup::Create(rank_, std::move(buckets));
}

}  // namespace gpipe::testing

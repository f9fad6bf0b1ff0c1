#include "tests/exec/issue_order_channel.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/comm/reduce_group.h"

namespace gpipe::testing {
namespace {

bool SameKey(const TransferKey& a, const TransferKey& b) {
  return a.step == b.step && a.micro_batch == b.micro_batch && a.chunk == b.chunk &&
         a.kind == b.kind;
}

// Completes a matched pair: the payload lands in the receive's tensor, or both fail.
void Complete(IssueOrderHub::Operation& send, IssueOrderHub::Operation& recv) {
  if (!SameKey(send.key, recv.key) || send.tensor.shape() != recv.tensor.shape()) {
    const absl::Status mismatch = absl::InvalidArgumentError(absl::StrCat(
        "issue-order mismatch: a receive of ", ToString(recv.key), " ", recv.tensor.DebugString(),
        " met a send of ", ToString(send.key), " ", send.tensor.DebugString()));
    send.status = mismatch;
    recv.status = mismatch;
  } else {
    std::memcpy(recv.tensor.raw_data(), send.tensor.raw_data(), send.tensor.bytes());
  }
  send.done = true;
  recv.done = true;
}

class Handle final : public TransferHandle {
 public:
  Handle(IssueOrderHub& hub, std::shared_ptr<IssueOrderHub::Operation> operation)
      : hub_(hub), operation_(std::move(operation)) {}
  bool Done() override { return hub_.Done(*operation_); }
  absl::Status Wait(absl::Time deadline) override { return hub_.Wait(*operation_, deadline); }

 private:
  IssueOrderHub& hub_;
  std::shared_ptr<IssueOrderHub::Operation> operation_;
};

}  // namespace

void IssueOrderHub::Issue(int rank, int peer, std::shared_ptr<Operation> operation) {
  absl::MutexLock lock(&mu_);
  const bool send = operation->send;
  const std::pair<int, int> direction = send ? std::pair(rank, peer) : std::pair(peer, rank);
  (send ? sends_ : receives_)[direction].push_back(std::move(operation));
  if (rank == peer) {
    ProgressSelf(rank);
  } else {
    Progress(direction.first, direction.second);
  }
}

void IssueOrderHub::Progress(int from, int to) {
  std::deque<std::shared_ptr<Operation>>& sends = sends_[{from, to}];
  std::deque<std::shared_ptr<Operation>>& receives = receives_[{from, to}];
  while (!sends.empty() && !receives.empty()) {
    Complete(*sends.front(), *receives.front());
    sends.pop_front();
    receives.pop_front();
  }
}

void IssueOrderHub::ProgressSelf(int rank) {
  std::deque<std::shared_ptr<Operation>>& sends = sends_[{rank, rank}];
  std::deque<std::shared_ptr<Operation>>& receives = receives_[{rank, rank}];
  for (auto send = sends.begin(); send != sends.end(); ++send) {
    for (auto receive = receives.begin(); receive != receives.end(); ++receive) {
      if (!SameKey((*send)->key, (*receive)->key)) continue;
      Complete(**send, **receive);
      sends.erase(send);
      receives.erase(receive);
      return;
    }
  }
}

bool IssueOrderHub::Done(const Operation& operation) {
  absl::MutexLock lock(&mu_);
  return operation.done;
}

absl::Status IssueOrderHub::Wait(const Operation& operation, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto done = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return operation.done; };
  if (!mu_.AwaitWithDeadline(absl::Condition(&done), deadline)) {
    return absl::DeadlineExceededError(
        absl::StrCat(operation.send ? "send of " : "receive of ", ToString(operation.key),
                     " never matched: its other side was not posted (a send waited on before the "
                     "peer could post its receive hangs the same way under NCCL)"));
  }
  return operation.status;
}

absl::StatusOr<std::unique_ptr<TransferHandle>> IssueOrderChannel::Send(const Tensor& tensor,
                                                                        int peer_rank,
                                                                        const TransferKey& key) {
  auto operation = std::make_shared<IssueOrderHub::Operation>();
  operation->send = true;
  operation->key = key;
  absl::StatusOr<Tensor> copy = tensor.Clone(MemoryKind::kWorkspace);
  if (!copy.ok()) return copy.status();
  operation->tensor = *std::move(copy);
  hub_.Issue(rank_, peer_rank, operation);
  return std::unique_ptr<TransferHandle>(std::make_unique<Handle>(hub_, std::move(operation)));
}

absl::StatusOr<std::unique_ptr<TransferHandle>> IssueOrderChannel::Recv(Tensor& tensor,
                                                                        int peer_rank,
                                                                        const TransferKey& key) {
  auto operation = std::make_shared<IssueOrderHub::Operation>();
  operation->key = key;
  operation->tensor = tensor;
  hub_.Issue(rank_, peer_rank, operation);
  return std::unique_ptr<TransferHandle>(std::make_unique<Handle>(hub_, std::move(operation)));
}

absl::StatusOr<std::unique_ptr<ReduceGroup>> IssueOrderChannel::CreateReduceGroup(
    std::span<const int> group_ranks, std::vector<std::vector<int64_t>> buckets, absl::Time) {
  if (group_ranks.size() > 1) {
    return absl::UnimplementedError("the issue-order channel has no data-parallel replicas");
  }
  return SoloReduceGroup::Create(rank_, std::move(buckets));
}

}  // namespace gpipe::testing

#include "runtime/comm/nccl/nccl_self_link.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/comm/nccl/nccl_transfer.h"
#include "runtime/comm/transfer_header.h"
#include "runtime/comm/wait.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

// The handle of one side: done when the group it was issued in is, or when it failed first.
class SelfSideHandle final : public TransferHandle {
 public:
  SelfSideHandle(std::shared_ptr<NcclSelfLink::Side> side,
                 std::shared_ptr<NcclCommunicator> communicator)
      : side_(std::move(side)), communicator_(std::move(communicator)) {}

  bool Done() override {
    if (!side_->failure.ok()) return true;
    return side_->issued != nullptr && side_->issued->Done();
  }
  absl::Status Wait(absl::Time deadline) override {
    absl::Status status = PollUntil(
        [&]() -> absl::StatusOr<bool> {
          if (!side_->failure.ok()) return side_->failure;
          return side_->issued != nullptr && side_->issued->Done();
        },
        deadline, communicator_->abort_poller(), communicator_->clock(),
        [&] {
          return absl::StrCat(side_->description,
                              side_->issued == nullptr ? " (its other side was never posted)" : "");
        });
    if (status.ok() && side_->issued != nullptr) return side_->issued->Wait(deadline);
    if (side_->issued != nullptr && !side_->issued->Done()) {
      // Issued but stuck: the shared handle aborts the communicator.
      return side_->issued->Wait(absl::InfinitePast());
    }
    return status;
  }

 private:
  std::shared_ptr<NcclSelfLink::Side> side_;
  std::shared_ptr<NcclCommunicator> communicator_;
};

}  // namespace

NcclSelfLink::Key NcclSelfLink::KeyOf(const TransferKey& key) {
  return {key.step, key.micro_batch, key.chunk, static_cast<int32_t>(key.kind), key.skip_layer};
}

absl::StatusOr<std::unique_ptr<TransferHandle>> NcclSelfLink::Send(const Tensor& tensor,
                                                                   const TransferKey& key) {
  return Post(tensor, key, /*sending=*/true);
}

absl::StatusOr<std::unique_ptr<TransferHandle>> NcclSelfLink::Recv(Tensor& tensor,
                                                                   const TransferKey& key) {
  return Post(tensor, key, /*sending=*/false);
}

absl::StatusOr<std::unique_ptr<TransferHandle>> NcclSelfLink::Post(const Tensor& tensor,
                                                                   const TransferKey& key,
                                                                   bool sending) {
  auto side = std::make_shared<Side>();
  side->tensor = tensor;
  side->description = absl::StrCat("rank ", rank_, sending ? " sending " : " receiving ",
                                   Describe(key, tensor.dtype(), tensor.shape()),
                                   sending ? " to" : " from", " itself over NCCL");
  auto& mine = sending ? waiting_sends_ : waiting_receives_;
  auto& theirs = sending ? waiting_receives_ : waiting_sends_;
  if (mine.contains(KeyOf(key))) {
    return absl::FailedPreconditionError(
        absl::StrCat(side->description, ": the same transfer is already posted"));
  }
  auto other = theirs.find(KeyOf(key));
  if (other == theirs.end()) {
    mine.emplace(KeyOf(key), side);
  } else {
    std::shared_ptr<Side> partner = std::move(other->second);
    theirs.erase(other);
    if (partner->tensor.dtype() != tensor.dtype() || partner->tensor.shape() != tensor.shape()) {
      const Side& send = sending ? *side : *partner;
      const Side& recv = sending ? *partner : *side;
      const absl::Status mismatch = absl::InvalidArgumentError(absl::StrCat(
          "rank ", rank_, " expected ", Describe(key, recv.tensor.dtype(), recv.tensor.shape()),
          " from itself but sent ", Describe(key, send.tensor.dtype(), send.tensor.shape())));
      partner->failure = mismatch;
      return mismatch;
    }
    RETURN_IF_ERROR(sending ? Issue(*side, *partner) : Issue(*partner, *side));
  }
  return std::unique_ptr<TransferHandle>(std::make_unique<SelfSideHandle>(side, communicator_));
}

absl::Status NcclSelfLink::Issue(Side& send, Side& recv) {
  absl::Status status = communicator_->After(compute_stream_);
  const ncclDataType_t type = NcclElementType(send.tensor.dtype());
  const size_t count = static_cast<size_t>(send.tensor.num_elements());
  if (status.ok()) {
    status = communicator_->Issue(
        [&] {
          ncclResult_t result = ncclSend(send.tensor.raw_data(), count, type, 0,
                                         communicator_->comm(), communicator_->stream());
          if (result != ncclSuccess) return result;
          return ncclRecv(recv.tensor.raw_data(), count, type, 0, communicator_->comm(),
                          communicator_->stream());
        },
        communicator_->clock().Now() + issue_timeout_);
  }
  absl::StatusOr<cuda::Event> done =
      status.ok() ? communicator_->Record() : absl::StatusOr<cuda::Event>(status);
  if (!done.ok()) {
    status = WithContext(done.status(), send.description);
    send.failure = status;
    recv.failure = status;
    return status;
  }
  auto tensors = std::make_shared<std::pair<Tensor, Tensor>>(send.tensor, recv.tensor);
  auto handle = std::make_shared<NcclTransferHandle>(communicator_, std::nullopt,
                                                     NcclMilestone{*std::move(done), {}},
                                                     std::move(tensors), recv.description);
  send.issued = handle;
  recv.issued = handle;
  // The sides keep the tensors through the shared handle from here.
  send.tensor = Tensor();
  recv.tensor = Tensor();
  return absl::OkStatus();
}

}  // namespace gpipe

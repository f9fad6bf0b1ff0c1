#include "runtime/comm/host_staged_data_channel.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

// Staging memory is counted like the device tensor it stands for.
MemoryKind StagingKindOf(const TransferKey& key) {
  return key.kind == TransferKind::kGradient ? MemoryKind::kBoundaryGrad : MemoryKind::kBoundary;
}

// A host copy of `tensor` in the device's staging memory, taken after all work issued before.
absl::StatusOr<Tensor> StageToHost(Device& device, const Tensor& tensor, MemoryKind kind) {
  ASSIGN_OR_RETURN(Tensor staged,
                   Tensor::Empty(device.host_staging(), tensor.shape(), tensor.dtype(), kind));
  RETURN_IF_ERROR(device.CopyToHost(tensor, staged.raw_data(), staged.bytes()));
  return staged;
}

// Keeps the staged copy alive while the inner send may still read it.
class StagedSendHandle final : public TransferHandle {
 public:
  StagedSendHandle(std::unique_ptr<TransferHandle> host_handle, Tensor staged)
      : staged_(std::move(staged)), host_handle_(std::move(host_handle)) {}

  bool Done() override { return host_handle_->Done(); }
  absl::Status Wait(absl::Time deadline) override { return host_handle_->Wait(deadline); }

 private:
  // Declared before the inner handle so that it is destroyed after it.
  Tensor staged_;
  std::unique_ptr<TransferHandle> host_handle_;
};

// Copies the host tensors the inner transfer writes (a receive, or a reduction in place) into
// the device tensors once, when it completes.
class StagedCopyBackHandle final : public TransferHandle {
 public:
  StagedCopyBackHandle(std::unique_ptr<TransferHandle> host_handle, std::vector<Tensor> staged,
                       std::vector<Tensor> destinations, Device& device)
      : staged_(std::move(staged)),
        host_handle_(std::move(host_handle)),
        destinations_(std::move(destinations)),
        device_(device) {}

  bool Done() override {
    if (finished_) return true;
    if (!host_handle_->Done()) return false;
    // The inner receive has finished (or failed): its Wait returns at once with the outcome.
    Finish(host_handle_->Wait(absl::InfinitePast()));
    return true;
  }

  absl::Status Wait(absl::Time deadline) override {
    if (finished_) return outcome_;
    const absl::Status received = host_handle_->Wait(deadline);
    // A wait that ran out of time leaves an unfinished receive that may be waited for again.
    if (!received.ok() && !host_handle_->Done()) return received;
    Finish(received);
    return outcome_;
  }

 private:
  void Finish(const absl::Status& received) {
    finished_ = true;
    outcome_ = received;
    for (size_t i = 0; i < staged_.size() && outcome_.ok(); ++i) {
      outcome_ = device_.CopyFromHost(staged_[i].raw_data(), staged_[i].bytes(), destinations_[i]);
    }
    // CopyFromHost is done with the staging memory when it returns.
    staged_.clear();
    destinations_.clear();
  }

  // Declared before the inner handle so that it outlives it: the inner transfer writes into it.
  std::vector<Tensor> staged_;
  std::unique_ptr<TransferHandle> host_handle_;
  std::vector<Tensor> destinations_;
  Device& device_;
  bool finished_ = false;
  absl::Status outcome_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<TransferHandle>> HostStagedDataChannel::Send(
    const Tensor& tensor, int peer_rank, const TransferKey& key) {
  ASSIGN_OR_RETURN(Tensor staged, StageToHost(device_, tensor, StagingKindOf(key)));
  ASSIGN_OR_RETURN(std::unique_ptr<TransferHandle> host_handle,
                   host_channel_->Send(staged, peer_rank, key));
  return std::unique_ptr<TransferHandle>(
      std::make_unique<StagedSendHandle>(std::move(host_handle), std::move(staged)));
}

absl::StatusOr<std::unique_ptr<TransferHandle>> HostStagedDataChannel::Recv(
    Tensor& tensor, int peer_rank, const TransferKey& key) {
  ASSIGN_OR_RETURN(Tensor staged, Tensor::Empty(device_.host_staging(), tensor.shape(),
                                                tensor.dtype(), StagingKindOf(key)));
  ASSIGN_OR_RETURN(std::unique_ptr<TransferHandle> host_handle,
                   host_channel_->Recv(staged, peer_rank, key));
  return std::unique_ptr<TransferHandle>(std::make_unique<StagedCopyBackHandle>(
      std::move(host_handle), std::vector<Tensor>{std::move(staged)}, std::vector<Tensor>{tensor},
      device_));
}

namespace {

// Stages each bucket to the host, runs the collective there through the host channel's group and
// copies the results back when it completes (whole tensors: outside the elements a
// reduce-scatter leaves summed they hold this rank's own values, which are unspecified anyway).
class StagedReduceGroup final : public ReduceGroup {
 public:
  StagedReduceGroup(std::unique_ptr<ReduceGroup> host_group, Device& device)
      : host_group_(std::move(host_group)), device_(device) {}

  absl::StatusOr<std::unique_ptr<TransferHandle>> StartCollective(
      Collective collective, int bucket, std::span<Tensor> tensors) override {
    std::vector<Tensor> staged;
    staged.reserve(tensors.size());
    for (const Tensor& tensor : tensors) {
      if (!tensor.defined()) {
        return absl::InvalidArgumentError(
            absl::StrCat("bucket ", bucket, " holds an undefined tensor"));
      }
      ASSIGN_OR_RETURN(Tensor copy, StageToHost(device_, tensor, MemoryKind::kGradient));
      staged.push_back(std::move(copy));
    }
    ASSIGN_OR_RETURN(std::unique_ptr<TransferHandle> host_handle,
                     host_group_->StartCollective(collective, bucket, std::span<Tensor>(staged)));
    return std::unique_ptr<TransferHandle>(std::make_unique<StagedCopyBackHandle>(
        std::move(host_handle), std::move(staged),
        std::vector<Tensor>(tensors.begin(), tensors.end()), device_));
  }
  const std::vector<std::vector<int64_t>>& buckets() const override {
    return host_group_->buckets();
  }

 private:
  std::unique_ptr<ReduceGroup> host_group_;
  Device& device_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ReduceGroup>> HostStagedDataChannel::CreateReduceGroup(
    std::span<const int> group_ranks, std::vector<std::vector<int64_t>> buckets,
    absl::Time deadline) {
  ASSIGN_OR_RETURN(std::unique_ptr<ReduceGroup> host_group,
                   host_channel_->CreateReduceGroup(group_ranks, std::move(buckets), deadline));
  // One rank: the host group's handles are done at once and read nothing; staging would only
  // copy the bucket there and back.
  if (group_ranks.size() == 1) return host_group;
  return std::unique_ptr<ReduceGroup>(
      std::make_unique<StagedReduceGroup>(std::move(host_group), device_));
}

}  // namespace gpipe

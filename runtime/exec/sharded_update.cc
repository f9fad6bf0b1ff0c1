#include "runtime/exec/sharded_update.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/core/element_range.h"
#include "runtime/core/status_macros.h"

namespace gpipe {

absl::StatusOr<std::vector<Tensor>> OwnedGradientParts(std::span<const ChunkRefs> chunks,
                                                       int replica, int replicas) {
  std::vector<Tensor> parts;
  for (const ChunkRefs& chunk : chunks) {
    for (const Tensor& grad : chunk.parameters->grads()) {
      const ElementRange part = ShardRange(grad.num_elements(), replicas, replica);
      if (part.empty()) continue;
      ASSIGN_OR_RETURN(parts.emplace_back(), ElementView(grad, part));
    }
  }
  return parts;
}

absl::Status ParameterGather::Start() {
  if (pending()) {
    return absl::FailedPreconditionError(
        "the all-gather of the parameters started while the previous one is still pending");
  }
  const int count = buckets_.gradient_buckets();
  handles_.clear();
  handles_.resize(count);
  for (int b = count - 1; b >= 0; --b) {
    GradientBuckets::Bucket& bucket = buckets_.buckets()[b];
    absl::StatusOr<std::unique_ptr<TransferHandle>> handle =
        group_.StartCollective(Collective::kAllGather, b, std::span<Tensor>(bucket.values));
    if (!handle.ok()) {
      return WithContext(handle.status(), absl::StrCat("starting the all-gather of the parameters "
                                                       "of gradient bucket ",
                                                       b, " (", bucket.bytes, " bytes)"));
    }
    handles_[b] = *std::move(handle);
  }
  return absl::OkStatus();
}

absl::Status ParameterGather::WaitForBucket(int bucket, absl::Time deadline) {
  if (bucket < 0 || bucket >= static_cast<int>(handles_.size()) || handles_[bucket] == nullptr) {
    return absl::OkStatus();
  }
  const absl::Time begin = absl::Now();
  const absl::Status status = handles_[bucket]->Wait(deadline);
  waited_ += absl::Now() - begin;
  RETURN_IF_ERROR(WithContext(
      status, absl::StrCat("all-gathering the parameters of gradient bucket ", bucket)));
  handles_[bucket].reset();
  return absl::OkStatus();
}

absl::Status ParameterGather::WaitForLayer(int chunk, int layer, absl::Time deadline) {
  return WaitForBucket(buckets_.BucketOf(chunk, layer), deadline);
}

absl::Status ParameterGather::WaitAll(absl::Time deadline) {
  // In the order they were started.
  for (int b = static_cast<int>(handles_.size()) - 1; b >= 0; --b) {
    RETURN_IF_ERROR(WaitForBucket(b, deadline));
  }
  return absl::OkStatus();
}

bool ParameterGather::pending() const {
  for (const std::unique_ptr<TransferHandle>& handle : handles_) {
    if (handle != nullptr) return true;
  }
  return false;
}

absl::Duration ParameterGather::TakeWaited() {
  return std::exchange(waited_, absl::ZeroDuration());
}

}  // namespace gpipe

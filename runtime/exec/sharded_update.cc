#include "runtime/exec/sharded_update.h"

#include <memory>

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

absl::Status AllGatherParameters(GradientBuckets& buckets, ReduceGroup& group,
                                 absl::Time deadline) {
  std::vector<std::unique_ptr<TransferHandle>> handles;
  for (int b = 0; b < buckets.gradient_buckets(); ++b) {
    GradientBuckets::Bucket& bucket = buckets.buckets()[b];
    absl::StatusOr<std::unique_ptr<TransferHandle>> handle =
        group.StartCollective(Collective::kAllGather, b, std::span<Tensor>(bucket.values));
    if (!handle.ok()) {
      return WithContext(handle.status(), absl::StrCat("starting the all-gather of the parameters "
                                                       "of gradient bucket ",
                                                       b, " (", bucket.bytes, " bytes)"));
    }
    handles.push_back(*std::move(handle));
  }
  for (size_t b = 0; b < handles.size(); ++b) {
    RETURN_IF_ERROR(
        WithContext(handles[b]->Wait(deadline),
                    absl::StrCat("all-gathering the parameters of gradient bucket ", b)));
  }
  return absl::OkStatus();
}

}  // namespace gpipe

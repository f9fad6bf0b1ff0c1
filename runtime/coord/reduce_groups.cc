#include "runtime/coord/reduce_groups.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/core/status_macros.h"

namespace gpipe {

absl::StatusOr<StageReduceGroups> StageReduceGroups::Make(
    DataChannel& channel, StageChunks& chunks, int rank, const std::vector<int>& replica_group,
    const std::vector<pb::TieGroup>& ties, int64_t gradient_bucket_bytes, absl::Time deadline) {
  StageReduceGroups groups;
  if (replica_group.size() > 1) {
    groups.buckets_ = std::make_unique<GradientBuckets>(
        GradientBuckets::Plan(chunks.refs(), gradient_bucket_bytes));
    // A stage without parameters or buffers has no buckets and needs no group.
    if (!groups.buckets_->buckets().empty()) {
      ASSIGN_OR_RETURN(groups.replicas_, channel.CreateReduceGroup(
                                             replica_group, groups.buckets_->Layout(), deadline));
    }
  }
  for (const pb::TieGroup& tie : ties) {
    std::unique_ptr<ReduceGroup>& group = groups.ties_.emplace_back();
    const std::vector<int> ranks(tie.ranks().begin(), tie.ranks().end());
    if (ranks.size() <= 1 || std::find(ranks.begin(), ranks.end(), rank) == ranks.end()) continue;
    // Every member has the first one's shape: the sum is one tensor of its elements.
    absl::StatusOr<int64_t> elements = absl::NotFoundError("no member here");
    for (const std::string& member : tie.parameters()) {
      if (elements.ok()) break;
      elements = chunks.ElementsOf(member);
    }
    if (!elements.ok()) {
      return absl::InternalError(absl::StrCat("rank ", rank, " is listed for the tie of ",
                                              absl::StrJoin(tie.parameters(), ", "),
                                              " but holds none of them; a gpipe bug"));
    }
    ASSIGN_OR_RETURN(group, channel.CreateReduceGroup(ranks, {{*elements}}, deadline));
  }
  return groups;
}

void StageReduceGroups::AttachTo(ExecutorResources& resources) {
  resources.gradient_buckets = buckets_.get();
  resources.replica_reducer = replicas_.get();
  resources.tie_reducers.clear();
  for (const std::unique_ptr<ReduceGroup>& group : ties_) {
    resources.tie_reducers.push_back(group.get());
  }
}

}  // namespace gpipe

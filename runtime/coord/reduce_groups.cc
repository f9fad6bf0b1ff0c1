#include "runtime/coord/reduce_groups.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

// The slots of the tie's members on this stage, in member order.
std::vector<ParameterSlot> MembersHere(const pb::TieGroup& tie, const StageChunks& chunks) {
  std::vector<ParameterSlot> members;
  for (const std::string& name : tie.parameters()) {
    for (const ParameterSlot& slot : chunks.SlotsOf(name)) members.push_back(slot);
  }
  return members;
}

}  // namespace

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
      groups.gather_ = std::make_unique<ParameterGather>(*groups.buckets_, *groups.replicas_);
    }
  }
  for (const pb::TieGroup& tie : ties) {
    std::unique_ptr<ReduceGroup>& group = groups.ties_.emplace_back();
    const std::vector<int> ranks(tie.ranks().begin(), tie.ranks().end());
    const bool listed = std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
    std::vector<ParameterSlot> members = MembersHere(tie, chunks);
    if (ranks.size() > 1 && listed) {
      if (members.empty()) {
        return absl::InternalError(absl::StrCat("rank ", rank, " is listed for the tie of ",
                                                absl::StrJoin(tie.parameters(), ", "),
                                                " but holds none of them; a gpipe bug"));
      }
      // Every member has the first one's shape: the sum is one tensor of its elements.
      const ParameterSlot first = members.front();
      const int64_t elements = chunks.parameters(first.chunk).grads()[first.index].num_elements();
      ASSIGN_OR_RETURN(group, channel.CreateReduceGroup(ranks, {{elements}}, deadline));
    }
    if (members.empty()) continue;
    const std::string what = absl::StrCat("summing the gradients of tied parameters ",
                                          absl::StrJoin(tie.parameters(), ", "), " over ranks [",
                                          absl::StrJoin(tie.ranks(), ", "), "]");
    if (ranks.size() > 1 && group == nullptr) {
      return absl::InternalError(
          absl::StrCat(what, ": rank ", rank, " holds a member but is not listed; a gpipe bug"));
    }
    groups.tied_.push_back(
        TiedGradientSum{.members = std::move(members), .group = group.get(), .what = what});
  }
  return groups;
}

void StageReduceGroups::AttachTo(ExecutorResources& resources) {
  resources.gradient_buckets = buckets_.get();
  resources.replica_reducer = replicas_.get();
  resources.parameter_gather = gather_.get();
  resources.tied_gradients = tied_;
}

}  // namespace gpipe

#include "runtime/schedule/rank_layout.h"

#include "absl/strings/str_cat.h"

namespace gpipe::schedule {

absl::StatusOr<RankLayout> RankLayout::Create(int replicas, int stages) {
  if (replicas < 1 || stages < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a rank layout needs >= 1 replica and >= 1 "
                     "stage, got ",
                     replicas, " x ", stages));
  }
  return RankLayout(replicas, stages);
}

absl::StatusOr<RankLayout> RankLayout::FromProto(const pb::RankLayoutProto& proto) {
  return Create(proto.replicas(), proto.stages());
}

pb::RankLayoutProto RankLayout::ToProto() const {
  pb::RankLayoutProto proto;
  proto.set_replicas(replicas_);
  proto.set_stages(stages_);
  return proto;
}

int RankLayout::NextRank(int rank, bool wraps) const {
  const int stage = StageOf(rank);
  if (stage + 1 < stages_) return rank + 1;
  return wraps ? RankOf(ReplicaOf(rank), 0) : -1;
}

int RankLayout::PrevRank(int rank, bool wraps) const {
  const int stage = StageOf(rank);
  if (stage > 0) return rank - 1;
  return wraps ? RankOf(ReplicaOf(rank), stages_ - 1) : -1;
}

std::vector<int> RankLayout::ReplicaGroup(int stage) const {
  std::vector<int> group;
  for (int r = 0; r < replicas_; ++r) group.push_back(RankOf(r, stage));
  return group;
}

}  // namespace gpipe::schedule

// RankLayout: which process (MPI rank) runs which pipeline stage of which data-parallel
// replica, the one place that mapping lives. Rank 0 builds it and ships it in every rank's
// setup; workers ask it for their neighbours and groups instead of assuming stage == rank.
// Layout: replica r's stage s runs on rank r * stages + s (a replica's stages are adjacent
// ranks, so a node holds whole pipelines when ranks fill nodes in order). Pure value type.
#ifndef GPIPE_RUNTIME_SCHEDULE_RANK_LAYOUT_H_
#define GPIPE_RUNTIME_SCHEDULE_RANK_LAYOUT_H_

#include <vector>

#include "absl/status/statusor.h"
#include "proto/control.pb.h"

namespace gpipe::schedule {

class RankLayout {
 public:
  // INVALID_ARGUMENT unless replicas >= 1 and stages >= 1.
  static absl::StatusOr<RankLayout> Create(int replicas, int stages);
  // From a setup's layout message, checked (INVALID_ARGUMENT naming what is inconsistent).
  static absl::StatusOr<RankLayout> FromProto(const pb::RankLayoutProto& proto);
  pb::RankLayoutProto ToProto() const;

  int replicas() const { return replicas_; }
  int stages() const { return stages_; }
  int world_size() const { return replicas_ * stages_; }

  int RankOf(int replica, int stage) const { return replica * stages_ + stage; }
  int StageOf(int rank) const { return rank % stages_; }
  int ReplicaOf(int rank) const { return rank / stages_; }
  // The rank of the next (previous) stage of `rank`'s replica; with `wraps` (interleaved
  // chunks) the last stage's next is the first and vice versa, else -1 at the ends.
  int NextRank(int rank, bool wraps) const;
  int PrevRank(int rank, bool wraps) const;
  // The ranks that hold `stage` in every replica, ascending (its gradient all-reduce group).
  std::vector<int> ReplicaGroup(int stage) const;

 private:
  RankLayout(int replicas, int stages) : replicas_(replicas), stages_(stages) {}
  int replicas_;
  int stages_;
};

}  // namespace gpipe::schedule

#endif  // GPIPE_RUNTIME_SCHEDULE_RANK_LAYOUT_H_

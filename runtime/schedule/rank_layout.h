// RankLayout: which process (MPI rank) runs which pipeline stage of which data-parallel
// replica, the one place that mapping lives. Rank 0 builds it and ships it in every rank's
// setup; workers ask it for their neighbours and groups instead of assuming stage == rank.
// Layout: replica r's stage s runs on rank r * stages + s (a replica's stages are adjacent
// ranks, so a node holds whole pipelines when ranks fill nodes in order). Pure value type.
#ifndef GPIPE_RUNTIME_SCHEDULE_RANK_LAYOUT_H_
#define GPIPE_RUNTIME_SCHEDULE_RANK_LAYOUT_H_

#include <map>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/control.pb.h"
#include "runtime/schedule/program.h"
#include "runtime/schedule/topology.h"

namespace gpipe::schedule {

// One skip connection (SkipRoute) seen from a rank holding one of its ends: the rank at the other
// end, in the same replica (the rank itself when both ends are its chunks), and the chunk each end
// runs as on its rank.
struct SkipLinkEnds {
  int peer = -1;
  int producer_chunk = 0;
  int join_chunk = 0;
};

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
  // The rank of `rank`'s replica that runs the virtual stage after (`next`) or before chunk
  // `chunk` of `rank`'s stage under `topology` (a looped pipeline with several chunks wraps from
  // the last stage to the first): -1 at the pipeline's ends, `rank` itself at a V_SHAPE turn
  // (a local hand-off). Precondition: topology.stages == stages(), 0 <= chunk < topology.chunks.
  int NeighbourRank(int rank, const Topology& topology, int chunk, bool next) const;
  // The other ranks `rank` exchanges boundary tensors with under `topology`, ascending.
  std::vector<int> Neighbours(int rank, const Topology& topology) const;
  // The routes with an end on `rank`, by join layer. Precondition: topology.stages == stages().
  std::map<int, SkipLinkEnds> SkipLinks(int rank, const Topology& topology,
                                        std::span<const SkipRoute> routes) const;
  // The ranks that hold `stage` in every replica, ascending (its gradient all-reduce group).
  std::vector<int> ReplicaGroup(int stage) const;

 private:
  RankLayout(int replicas, int stages) : replicas_(replicas), stages_(stages) {}
  int replicas_;
  int stages_;
};

}  // namespace gpipe::schedule

#endif  // GPIPE_RUNTIME_SCHEDULE_RANK_LAYOUT_H_

#include "runtime/schedule/rank_layout.h"

#include <algorithm>

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

int RankLayout::NeighbourRank(int rank, const Topology& topology, int chunk, bool next) const {
  const StageChunk at{StageOf(rank), chunk};
  if (next ? topology.IsLast(at) : topology.IsFirst(at)) return -1;
  const StageChunk peer = next ? topology.Next(at) : topology.Previous(at);
  return RankOf(ReplicaOf(rank), peer.stage);
}

std::vector<int> RankLayout::Neighbours(int rank, const Topology& topology) const {
  std::vector<int> peers;
  for (int chunk = 0; chunk < topology.chunks; ++chunk) {
    for (const bool next : {false, true}) {
      const int peer = NeighbourRank(rank, topology, chunk, next);
      if (peer >= 0 && peer != rank) peers.push_back(peer);
    }
  }
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  return peers;
}

std::map<int, SkipLinkEnds> RankLayout::SkipLinks(int rank, const Topology& topology,
                                                  std::span<const SkipRoute> routes) const {
  std::map<int, SkipLinkEnds> links;
  const int stage = StageOf(rank);
  for (const SkipRoute& route : routes) {
    const StageChunk producer = topology.At(route.from);
    const StageChunk join = topology.At(route.to);
    if (producer.stage != stage && join.stage != stage) continue;
    const int other = producer.stage == stage ? join.stage : producer.stage;
    links[route.layer] = {.peer = RankOf(ReplicaOf(rank), other),
                          .producer_chunk = producer.chunk,
                          .join_chunk = join.chunk};
  }
  return links;
}

std::vector<int> RankLayout::ReplicaGroup(int stage) const {
  std::vector<int> group;
  for (int r = 0; r < replicas_; ++r) group.push_back(RankOf(r, stage));
  return group;
}

}  // namespace gpipe::schedule

#include "runtime/schedule/rank_layout.h"

#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpipe::schedule {
namespace {

using ::testing::ElementsAre;

TEST(RankLayoutTest, EveryRankHoldsOneReplicaStagePair) {
  const RankLayout layout = *RankLayout::Create(/*replicas=*/3, /*stages=*/4);
  EXPECT_EQ(layout.world_size(), 12);
  std::set<std::pair<int, int>> seen;
  for (int rank = 0; rank < layout.world_size(); ++rank) {
    const int replica = layout.ReplicaOf(rank);
    const int stage = layout.StageOf(rank);
    EXPECT_EQ(layout.RankOf(replica, stage), rank);
    seen.insert({replica, stage});
  }
  EXPECT_EQ(seen.size(), 12u);
}

TEST(RankLayoutTest, OneReplicaRunsStageSOnRankS) {
  const RankLayout layout = *RankLayout::Create(1, 4);
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(layout.RankOf(0, s), s);
    EXPECT_EQ(layout.StageOf(s), s);
  }
}

TEST(RankLayoutTest, NeighboursStayInTheReplica) {
  const RankLayout layout = *RankLayout::Create(2, 3);
  const Topology plain{.stages = 3};
  // Replica 1 is ranks 3, 4, 5.
  EXPECT_EQ(layout.NeighbourRank(3, plain, 0, /*next=*/false), -1);
  EXPECT_EQ(layout.NeighbourRank(3, plain, 0, /*next=*/true), 4);
  EXPECT_EQ(layout.NeighbourRank(5, plain, 0, true), -1);
  EXPECT_EQ(layout.NeighbourRank(5, plain, 0, false), 4);
  EXPECT_THAT(layout.Neighbours(4, plain), ElementsAre(3, 5));
  // Looped chunks wrap around within the replica.
  const Topology looped{.stages = 3, .chunks = 2};
  EXPECT_EQ(layout.NeighbourRank(5, looped, 0, true), 3);
  EXPECT_EQ(layout.NeighbourRank(3, looped, 1, false), 5);
  EXPECT_EQ(layout.NeighbourRank(3, looped, 0, false), -1);
  EXPECT_EQ(layout.NeighbourRank(5, looped, 1, true), -1);
  EXPECT_THAT(layout.Neighbours(3, looped), ElementsAre(4, 5));
}

TEST(RankLayoutTest, VShapeTurnsOnTheLastStageAndEndsOnTheFirst) {
  const RankLayout layout = *RankLayout::Create(2, 3);
  const Topology v{.stages = 3, .chunks = 2, .placement = pb::V_SHAPE};
  // Replica 1 (ranks 3, 4, 5) runs virtual stages 0..5 on ranks 3, 4, 5, 5, 4, 3.
  EXPECT_EQ(layout.NeighbourRank(5, v, 0, /*next=*/true), 5);  // the turn: a local hand-off
  EXPECT_EQ(layout.NeighbourRank(5, v, 1, /*next=*/false), 5);
  EXPECT_EQ(layout.NeighbourRank(5, v, 1, true), 4);
  EXPECT_EQ(layout.NeighbourRank(4, v, 1, true), 3);
  EXPECT_EQ(layout.NeighbourRank(3, v, 1, true), -1);  // the last virtual stage
  EXPECT_EQ(layout.NeighbourRank(3, v, 0, false), -1);
  EXPECT_THAT(layout.Neighbours(3, v), ElementsAre(4));
  EXPECT_THAT(layout.Neighbours(5, v), ElementsAre(4));
  EXPECT_THAT(layout.Neighbours(4, v), ElementsAre(3, 5));
}

TEST(RankLayoutTest, ReplicaGroupHoldsTheStageOfEveryReplica) {
  const RankLayout layout = *RankLayout::Create(3, 2);
  EXPECT_THAT(layout.ReplicaGroup(0), ElementsAre(0, 2, 4));
  EXPECT_THAT(layout.ReplicaGroup(1), ElementsAre(1, 3, 5));
}

TEST(RankLayoutTest, RoundTripsThroughItsProto) {
  const RankLayout layout = *RankLayout::Create(2, 5);
  const RankLayout back = *RankLayout::FromProto(layout.ToProto());
  EXPECT_EQ(back.replicas(), 2);
  EXPECT_EQ(back.stages(), 5);
}

TEST(RankLayoutTest, RejectsEmptyLayouts) {
  EXPECT_EQ(RankLayout::Create(0, 4).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RankLayout::Create(1, 0).status().code(), absl::StatusCode::kInvalidArgument);
  pb::RankLayoutProto bad;
  bad.set_stages(-1);
  EXPECT_FALSE(RankLayout::FromProto(bad).ok());
}

}  // namespace
}  // namespace gpipe::schedule

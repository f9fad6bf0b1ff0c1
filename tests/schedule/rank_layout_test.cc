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
  // Replica 1 is ranks 3, 4, 5.
  EXPECT_EQ(layout.PrevRank(3, /*wraps=*/false), -1);
  EXPECT_EQ(layout.NextRank(3, false), 4);
  EXPECT_EQ(layout.NextRank(5, false), -1);
  EXPECT_EQ(layout.PrevRank(5, false), 4);
  // Interleaved chunks wrap around within the replica.
  EXPECT_EQ(layout.NextRank(5, /*wraps=*/true), 3);
  EXPECT_EQ(layout.PrevRank(3, true), 5);
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

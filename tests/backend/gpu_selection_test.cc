// Which GPU each rank of a node takes, and the start-up errors when the node's GPUs do not
// fit its ranks: the pure decision behind the CUDA backend, checked without a GPU.
#include "runtime/backend/cuda/gpu_selection.h"

#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpipe {
namespace {

using ::testing::HasSubstr;

NodeRanks Node(int local_rank, int local_size, int world_rank = 0) {
  return NodeRanks{.world_rank = world_rank,
                   .host = "node7",
                   .local_rank = local_rank,
                   .local_size = local_size};
}

TEST(GpuSelectionTest, EachRankOfAFullNodeGetsItsOwnGpu) {
  std::vector<int> ordinals;
  for (int r = 0; r < 4; ++r) {
    absl::StatusOr<GpuChoice> choice = SelectGpu(Node(r, 4), 4, false, std::nullopt);
    ASSERT_TRUE(choice.ok()) << choice.status();
    EXPECT_FALSE(choice->shared);
    ordinals.push_back(choice->ordinal);
  }
  EXPECT_EQ(ordinals, (std::vector<int>{0, 1, 2, 3}));
}

TEST(GpuSelectionTest, FewerRanksThanGpusUseTheFirstOnes) {
  absl::StatusOr<GpuChoice> choice = SelectGpu(Node(1, 2), 8, false, std::nullopt);
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->ordinal, 1);
  EXPECT_FALSE(choice->shared);
}

TEST(GpuSelectionTest, SharingAssignsGpusRoundRobin) {
  std::vector<int> ordinals;
  for (int r = 0; r < 5; ++r) {
    absl::StatusOr<GpuChoice> choice = SelectGpu(Node(r, 5), 2, true, std::nullopt);
    ASSERT_TRUE(choice.ok()) << choice.status();
    EXPECT_TRUE(choice->shared);
    ordinals.push_back(choice->ordinal);
  }
  EXPECT_EQ(ordinals, (std::vector<int>{0, 1, 0, 1, 0}));
}

TEST(GpuSelectionTest, OneGpuSharedByFourRanks) {
  for (int r = 0; r < 4; ++r) {
    absl::StatusOr<GpuChoice> choice = SelectGpu(Node(r, 4), 1, true, std::nullopt);
    ASSERT_TRUE(choice.ok()) << choice.status();
    EXPECT_EQ(choice->ordinal, 0);
    EXPECT_TRUE(choice->shared);
  }
}

TEST(GpuSelectionTest, SharingAllowedButNotNeededIsNotShared) {
  absl::StatusOr<GpuChoice> choice = SelectGpu(Node(0, 1), 1, true, std::nullopt);
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->ordinal, 0);
  EXPECT_FALSE(choice->shared);
}

TEST(GpuSelectionTest, NoVisibleGpuNamesRankHostAndTheVariable) {
  absl::StatusOr<GpuChoice> choice = SelectGpu(Node(1, 2, 5), 0, true, std::string(""));
  ASSERT_FALSE(choice.ok());
  EXPECT_EQ(choice.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(choice.status().message(),
            "device: CUDA but no GPU is visible to rank 5 on host node7 (CUDA_VISIBLE_DEVICES=)");
}

TEST(GpuSelectionTest, NoVisibleGpuSaysWhenTheVariableIsUnset) {
  absl::StatusOr<GpuChoice> choice = SelectGpu(Node(0, 1, 0), 0, false, std::nullopt);
  ASSERT_FALSE(choice.ok());
  EXPECT_EQ(choice.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(choice.status().message(), HasSubstr("rank 0 on host node7"));
  EXPECT_THAT(choice.status().message(), HasSubstr("CUDA_VISIBLE_DEVICES unset"));
}

TEST(GpuSelectionTest, MoreRanksThanGpusWithoutSharingSaysHowManyAndWhatAllowsIt) {
  absl::StatusOr<GpuChoice> choice = SelectGpu(Node(0, 4), 2, false, std::string("0,1"));
  ASSERT_FALSE(choice.ok());
  EXPECT_EQ(choice.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(choice.status().message(), HasSubstr("host node7 runs 4 ranks"));
  EXPECT_THAT(choice.status().message(), HasSubstr("only 2 GPUs"));
  EXPECT_THAT(choice.status().message(), HasSubstr("CUDA_VISIBLE_DEVICES=0,1"));
  EXPECT_THAT(choice.status().message(), HasSubstr("share_gpu: true"));
}

TEST(GpuSelectionTest, EveryRankOfAnOversubscribedNodeFailsAlike) {
  // Not only the ranks beyond the GPU count: the whole node's job is misconfigured.
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(SelectGpu(Node(r, 3), 2, false, std::nullopt).status().code(),
              absl::StatusCode::kFailedPrecondition)
        << "local rank " << r;
  }
}

TEST(GpuSelectionTest, InconsistentNodeRanksAreRejected) {
  EXPECT_EQ(SelectGpu(Node(2, 2), 4, false, std::nullopt).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SelectGpu(Node(0, 0), 4, false, std::nullopt).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpipe

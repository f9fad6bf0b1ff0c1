// BalancePartition against brute force over every contiguous partition.
#include "runtime/plan/partition.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpipe {
namespace {

using ::testing::ElementsAre;

double Cost(const std::vector<double>& costs, int begin, int end) {
  double sum = 0;
  for (int i = begin; i < end; ++i) sum += costs[i];
  return sum;
}

double LargestStage(const std::vector<double>& costs, const std::vector<int>& starts) {
  double largest = 0;
  for (size_t s = 0; s < starts.size(); ++s) {
    const int end = s + 1 < starts.size() ? starts[s + 1] : static_cast<int>(costs.size());
    largest = std::max(largest, Cost(costs, starts[s], end));
  }
  return largest;
}

// Every way to choose stages-1 cut points in 1..L-1, in lexicographic order of the starts.
void EnumerateStarts(int layers, int stages, std::vector<int>& current,
                     std::vector<std::vector<int>>& out) {
  if (static_cast<int>(current.size()) == stages) {
    out.push_back(current);
    return;
  }
  const int remaining = stages - static_cast<int>(current.size());
  for (int next = current.back() + 1; next + remaining - 1 < layers; ++next) {
    current.push_back(next);
    EnumerateStarts(layers, stages, current, out);
    current.pop_back();
  }
}

// The documented answer: minimal largest stage, then the lexicographically largest starts.
std::vector<int> BruteForce(const std::vector<double>& costs, int stages) {
  std::vector<std::vector<int>> all;
  std::vector<int> current = {0};
  EnumerateStarts(static_cast<int>(costs.size()), stages, current, all);
  std::vector<int> best;
  double best_cost = 0;
  for (const auto& starts : all) {
    const double cost = LargestStage(costs, starts);
    if (best.empty() || cost < best_cost || (cost == best_cost && starts > best)) {
      best = starts;
      best_cost = cost;
    }
  }
  return best;
}

TEST(BalancePartitionTest, MatchesBruteForceOnSmallIntegerCostsWithTiesAndZeros) {
  // Costs from {0..4}: many ties and zero-cost layers; integer values make sums exact.
  int cases = 0;
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    std::mt19937 rng(seed);
    const int layers = 1 + static_cast<int>(rng() % 12);
    std::vector<double> costs(layers);
    for (double& c : costs) c = static_cast<double>(rng() % 5);
    for (int stages = 1; stages <= layers; ++stages) {
      auto starts = BalancePartition(costs, stages);
      ASSERT_TRUE(starts.ok()) << starts.status();
      ASSERT_EQ(*starts, BruteForce(costs, stages))
          << "seed " << seed << " layers " << layers << " stages " << stages;
      ++cases;
    }
  }
  EXPECT_GT(cases, 1000);
}

TEST(BalancePartitionTest, MatchesBruteForceOnWideIntegerCosts) {
  // Parameter-count-like costs: mostly large and distinct, some zero (activations).
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    std::mt19937_64 rng(seed);
    const int layers = 1 + static_cast<int>(rng() % 12);
    std::vector<double> costs(layers);
    for (double& c : costs) c = rng() % 3 == 0 ? 0.0 : static_cast<double>(rng() % 1000000);
    for (int stages = 1; stages <= layers; ++stages) {
      auto starts = BalancePartition(costs, stages);
      ASSERT_TRUE(starts.ok()) << starts.status();
      ASSERT_EQ(*starts, BruteForce(costs, stages)) << "seed " << seed << " stages " << stages;
    }
  }
}

TEST(BalancePartitionTest, RealValuedCostsReachTheBruteForceOptimum) {
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> uniform(0.0, 10.0);
    const int layers = 1 + static_cast<int>(rng() % 12);
    std::vector<double> costs(layers);
    for (double& c : costs) c = uniform(rng);
    for (int stages = 1; stages <= layers; ++stages) {
      auto starts = BalancePartition(costs, stages);
      ASSERT_TRUE(starts.ok()) << starts.status();
      ASSERT_EQ(starts->size(), static_cast<size_t>(stages));
      EXPECT_NEAR(LargestStage(costs, *starts), LargestStage(costs, BruteForce(costs, stages)),
                  1e-9)
          << "seed " << seed << " stages " << stages;
    }
  }
}

TEST(BalancePartitionTest, TiesPutEachBoundaryAsLateAsPossible) {
  // [10, 0, 10, 0]: {0,1} and {0,2} both give 10; the zero-cost layer stays with its linear.
  const std::vector<double> costs = {10, 0, 10, 0};
  EXPECT_THAT(*BalancePartition(costs, 2), ElementsAre(0, 2));
  // Equal costs, 5 layers in 2 stages: 3 + 2, the earlier stage takes the extra layer.
  const std::vector<double> equal = {1, 1, 1, 1, 1};
  EXPECT_THAT(*BalancePartition(equal, 2), ElementsAre(0, 3));
}

TEST(BalancePartitionTest, AllZeroCostsStillGiveEveryStageALayer) {
  const std::vector<double> zeros(5, 0.0);
  EXPECT_THAT(*BalancePartition(zeros, 3), ElementsAre(0, 3, 4));
  EXPECT_THAT(*BalancePartition(zeros, 5), ElementsAre(0, 1, 2, 3, 4));
}

TEST(BalancePartitionTest, OneStageStartsAtZero) {
  const std::vector<double> costs = {3, 1, 4};
  EXPECT_THAT(*BalancePartition(costs, 1), ElementsAre(0));
}

TEST(BalancePartitionTest, HeavyLayerGetsItsOwnStage) {
  const std::vector<double> costs = {1, 1, 100, 1, 1};
  EXPECT_THAT(*BalancePartition(costs, 3), ElementsAre(0, 2, 3));
}

TEST(BalancePartitionTest, RejectsStageCountsOutsideOneToLayers) {
  const std::vector<double> costs = {1, 2};
  EXPECT_EQ(BalancePartition(costs, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BalancePartition(costs, 3).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BalancePartition(std::vector<double>{}, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(BalancePartitionTest, RejectsNegativeAndNonFiniteCosts) {
  EXPECT_EQ(BalancePartition(std::vector<double>{1, -1}, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BalancePartition(std::vector<double>{1, std::nan("")}, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpipe

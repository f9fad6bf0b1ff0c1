// BalancePlan on examples/uneven_convnet (convolution widths 16 to 128 over planes 32x32 to 4x4):
// the chosen partition is predicted no slower than balancing by parameters, FLOPs or layer
// count (and the partitioner's own within 1% of the best), and under a memory limit the
// partitioner's is the one that fits.
#include "runtime/estimate/plan_balance.h"

#include <algorithm>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "layers/registry.h"
#include "runtime/plan/plan_analysis.h"
#include "runtime/plan/plan_loader.h"

namespace gpipe {
namespace {

using ::testing::HasSubstr;

LoadedPlan Uneven() {
  absl::StatusOr<LoadedPlan> loaded =
      LoadPlanFile(std::string(GPIPE_EXAMPLES_DIR) + "/uneven_convnet/plan.pbtxt", {});
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  return *loaded;
}

int64_t Fullest(const BalanceCandidate& c) {
  return *std::max_element(c.stage_bytes.begin(), c.stage_bytes.end());
}

TEST(PlanBalanceTest, MeasuredCostIsNeverSlowerThanTheOtherRules) {
  const LayerRegistry registry = LayerRegistry::WithBuiltins();
  for (const int stages : {2, 3, 4, 6}) {
    absl::StatusOr<BalanceResult> result =
        BalancePlan(Uneven(), registry, BalanceOptions{.stages = stages});
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_EQ(result->candidates.size(), 4u);
    const BalanceCandidate& chosen = result->candidates[result->chosen];
    const BalanceCandidate& partitioner = result->candidates[0];
    EXPECT_EQ(chosen.starts.size(), static_cast<size_t>(stages));
    for (const BalanceCandidate& other : result->candidates) {
      EXPECT_LE(chosen.step_ms, other.step_ms) << stages << " stages, " << other.method;
      // The partitioner's flow-shop model is close to the schedule's simulation.
      EXPECT_LE(partitioner.step_ms, 1.01 * other.step_ms) << stages << " stages, " << other.method;
    }
    // Parameters sit in the head: balancing by them leaves the convolutions on one stage.
    EXPECT_LT(chosen.step_ms, 0.7 * result->candidates[1].step_ms) << stages << " stages";
    // The written plan carries the chosen boundaries.
    EXPECT_EQ(result->plan.pipeline().stages(), stages);
    EXPECT_EQ(result->plan.pipeline().boundaries_size(), stages - 1);
    EXPECT_EQ(result->plan.runtime().device(), pb::SIM);
  }
}

TEST(PlanBalanceTest, UnderAMemoryLimitOnlyTheMemoryAwarePartitionFits) {
  const LayerRegistry registry = LayerRegistry::WithBuiltins();
  absl::StatusOr<BalanceResult> free = BalancePlan(Uneven(), registry, BalanceOptions{});
  ASSERT_TRUE(free.ok()) << free.status();
  // Just below what the leanest fixed rule needs: none of them fits.
  int64_t leanest = Fullest(free->candidates[1]);
  for (size_t i = 2; i < free->candidates.size(); ++i) {
    leanest = std::min(leanest, Fullest(free->candidates[i]));
  }
  const int64_t limit = leanest - 1;
  absl::StatusOr<BalanceResult> limited =
      BalancePlan(Uneven(), registry, BalanceOptions{.memory_limit = limit});
  ASSERT_TRUE(limited.ok()) << limited.status();
  ASSERT_EQ(limited->chosen, 0u);
  const BalanceCandidate& chosen = limited->candidates[0];
  EXPECT_TRUE(chosen.fits);
  EXPECT_LE(Fullest(chosen), limit);
  for (size_t i = 1; i < limited->candidates.size(); ++i) {
    EXPECT_FALSE(limited->candidates[i].fits) << limited->candidates[i].method;
  }
  EXPECT_GE(chosen.step_ms, free->candidates[0].step_ms);  // memory costs time here
  const std::string table = FormatBalance(*limited, limit);
  EXPECT_THAT(table, HasSubstr("measured cost and memory"));
  EXPECT_THAT(table, HasSubstr("chosen: --override 'pipeline { stages: 4 boundaries: [\""));
}

TEST(PlanBalanceTest, AnImpossibleLimitSaysWhatTheFullestStageNeeds) {
  const LayerRegistry registry = LayerRegistry::WithBuiltins();
  absl::StatusOr<BalanceResult> result =
      BalancePlan(Uneven(), registry, BalanceOptions{.memory_limit = 1000000});
  ASSERT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted) << result.status();
  EXPECT_THAT(result.status().message(), HasSubstr("within 1000000 bytes"));
  EXPECT_THAT(result.status().message(), HasSubstr("bytes on its fullest stage"));
}

TEST(PlanBalanceTest, InterleavedPlansAndBadCountsAreRefused) {
  const LayerRegistry registry = LayerRegistry::WithBuiltins();
  LoadedPlan interleaved = Uneven();
  interleaved.plan.mutable_pipeline()->set_schedule(pb::INTERLEAVED_1F1B);
  interleaved.plan.mutable_pipeline()->set_virtual_stages(2);
  EXPECT_EQ(BalancePlan(interleaved, registry, BalanceOptions{}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(BalancePlan(Uneven(), registry, BalanceOptions{.stages = 99}).ok());
  EXPECT_EQ(BalancePlan(Uneven(), registry, BalanceOptions{.memory_limit = -5}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PlanBalanceTest, BalanceProfileResolvesToTheBalancersChoice) {
  const LayerRegistry registry = LayerRegistry::WithBuiltins();
  LoadedPlan plan = Uneven();
  plan.plan.mutable_pipeline()->set_balance(pb::PROFILE);
  plan.plan.mutable_runtime()->set_memory_limit_bytes(6500000);
  // Unresolved, the analysis refuses it rather than guess a partition.
  EXPECT_EQ(AnalyzePlan(plan, registry).status().code(), absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<BalanceResult> expected =
      BalancePlan(plan, registry, BalanceOptions{.memory_limit = 6500000});
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_TRUE(ResolveProfileBalance(plan, registry).ok());
  EXPECT_THAT(plan.plan.pipeline().boundaries(),
              ::testing::ElementsAreArray(expected->plan.pipeline().boundaries()));
  absl::StatusOr<AnalyzedPlan> analyzed = AnalyzePlan(plan, registry);
  ASSERT_TRUE(analyzed.ok()) << analyzed.status();
  EXPECT_EQ(analyzed->stages[1].first_layer, expected->candidates[expected->chosen].starts[1]);

  // Explicit boundaries, or another balance, are left alone.
  LoadedPlan explicit_plan = Uneven();
  explicit_plan.plan.mutable_pipeline()->set_balance(pb::PROFILE);
  for (const char* name : {"c3", "c5", "c7"}) {
    explicit_plan.plan.mutable_pipeline()->add_boundaries(name);
  }
  ASSERT_TRUE(ResolveProfileBalance(explicit_plan, registry).ok());
  EXPECT_THAT(explicit_plan.plan.pipeline().boundaries(), ::testing::ElementsAre("c3", "c5", "c7"));
  LoadedPlan flops = Uneven();
  flops.plan.mutable_pipeline()->set_balance(pb::FLOPS);
  ASSERT_TRUE(ResolveProfileBalance(flops, registry).ok());
  EXPECT_EQ(flops.plan.pipeline().boundaries_size(), 0);

  // A limit nothing fits: the error names where the balance was asked for.
  LoadedPlan tight = Uneven();
  tight.plan.mutable_pipeline()->set_balance(pb::PROFILE);
  tight.plan.mutable_runtime()->set_memory_limit_bytes(1000);
  const absl::Status status = ResolveProfileBalance(tight, registry);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), HasSubstr("uneven_convnet/plan.pbtxt"));
  EXPECT_THAT(status.message(), HasSubstr("pipeline.balance: PROFILE: "));
}

}  // namespace
}  // namespace gpipe

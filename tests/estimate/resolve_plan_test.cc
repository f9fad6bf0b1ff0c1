// ResolvePlan, the sequence every entry point shares: a PROFILE plan comes back with the
// balancer's boundaries and analyzed on them; a caller's check of the loaded plan runs first and
// its error is returned as it is; profiling skips the balance; plan text stands for a file in
// messages under its name; a load error is the loader's.
#include "runtime/estimate/resolve_plan.h"

#include <fstream>
#include <iterator>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/estimate/plan_balance.h"

namespace gpipe {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

const std::string kUneven = std::string(GPIPE_EXAMPLES_DIR) + "/uneven_convnet/plan.pbtxt";
constexpr char kProfile[] = "pipeline { balance: PROFILE } runtime { memory_limit_bytes: 6500000 }";

TEST(ResolvePlanTest, ProfileBalanceIsResolvedBeforeTheAnalysis) {
  const LayerRegistry registry = LayerRegistry::WithBuiltins();
  absl::StatusOr<ResolvedPlan> resolved = ResolvePlan(PlanFile{kUneven}, {kProfile}, registry);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  absl::StatusOr<LoadedPlan> loaded = LoadPlanFile(kUneven, {kProfile});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_TRUE(ResolveProfileBalance(*loaded, registry).ok());
  EXPECT_THAT(resolved->loaded.plan.pipeline().boundaries(),
              ElementsAreArray(loaded->plan.pipeline().boundaries()));
  ASSERT_EQ(resolved->analyzed.stages.size(), 4u);
  EXPECT_EQ(resolved->analyzed.layers[resolved->analyzed.stages[1].first_layer].name,
            loaded->plan.pipeline().boundaries(0));
}

TEST(ResolvePlanTest, TheCallersCheckRunsFirstAndItsErrorIsReturnedAsItIs) {
  int checked = 0;
  const ResolveOptions options{.check_loaded = [&checked](const LoadedPlan& loaded) {
    ++checked;
    EXPECT_EQ(loaded.plan.pipeline().boundaries_size(), 0);  // before the balance
    return absl::PermissionDeniedError("refused by the caller");
  }};
  absl::StatusOr<ResolvedPlan> resolved =
      ResolvePlan(PlanFile{kUneven}, {kProfile}, LayerRegistry::WithBuiltins(), options);
  EXPECT_EQ(checked, 1);
  EXPECT_EQ(resolved.status(), absl::PermissionDeniedError("refused by the caller"));
}

TEST(ResolvePlanTest, WithoutTheProfileBalanceAProfilePlanIsAnalyzedByParameters) {
  absl::StatusOr<ResolvedPlan> resolved =
      ResolvePlan(PlanFile{kUneven}, {"pipeline { balance: PROFILE }"},
                  LayerRegistry::WithBuiltins(), ResolveOptions{.resolve_profile_balance = false});
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->loaded.plan.pipeline().balance(), pb::PARAMETERS);
  EXPECT_EQ(resolved->loaded.plan.pipeline().boundaries_size(), 0);
}

TEST(ResolvePlanTest, TextStandsForAFileUnderItsName) {
  std::ifstream file(kUneven);
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(text.empty());
  absl::StatusOr<ResolvedPlan> resolved =
      ResolvePlan(PlanText{.text = text, .name = "embedded.pbtxt", .directory = "."},
                  {"pipeline { balance: PROFILE } runtime { memory_limit_bytes: 1000 }"},
                  LayerRegistry::WithBuiltins());
  EXPECT_EQ(resolved.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(resolved.status().message(), HasSubstr("--override[1]:1:12: pipeline.balance: "
                                                     "PROFILE: "));
  absl::StatusOr<ResolvedPlan> broken = ResolvePlan(
      PlanText{.text = "pipeline {\n  stagez: 4\n}\n", .name = "embedded.pbtxt", .directory = "."},
      {}, LayerRegistry::WithBuiltins());
  EXPECT_THAT(broken.status().message(), HasSubstr("embedded.pbtxt:2:3: "));
}

TEST(ResolvePlanTest, AMissingFileIsTheLoadersError) {
  absl::StatusOr<ResolvedPlan> resolved =
      ResolvePlan(PlanFile{"no_such_plan_here.pbtxt"}, {}, LayerRegistry::WithBuiltins());
  EXPECT_EQ(resolved.status(), LoadPlanFile("no_such_plan_here.pbtxt", {}).status());
}

}  // namespace
}  // namespace gpipe

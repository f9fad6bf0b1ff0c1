// Skip connections across stages under mpirun (tests/e2e/testdata/skips.pbtxt): a skip_concat
// inside the first part, and act1's output read one, two and three stages on, train to the bits
// of single-stage training at every stage count, under the V schedules (where the three-stage
// skip becomes a hand-off between rank 0's two chunks), in bf16, and with data-parallel replicas;
// `gpipe-plan show` lists the routes.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/equivalence_harness.h"
#include "tests/support/process_runner.h"

namespace gpipe {
namespace {

using ::gpipe::testing::Weights;
using ::testing::HasSubstr;

constexpr char kSkips[] = "tests/e2e/testdata/skips.pbtxt";

// The parts at K stages (see the plan's comment): spans 1, 2 and 3 at K = 4.
std::string Parts(int parts) {
  switch (parts) {
    case 2:
      return "pipeline { boundaries: ['act2'] }";
    case 3:
      return "pipeline { boundaries: ['fc2', 'fc4'] }";
    default:
      return "pipeline { boundaries: ['fc2', 'act2', 'fc4'] }";
  }
}

class SkipTest : public testing::EquivalenceHarness {};

TEST_F(SkipTest, StageCountsGiveBitIdenticalWeights) {
  const Weights one = Train(1, {}, kSkips);
  ExpectBitIdentical(Train(2, {Parts(2)}, kSkips), one);
  ExpectBitIdentical(Train(3, {Parts(3), "pipeline { remat: ALWAYS }"}, kSkips), one);
  ExpectBitIdentical(Train(4, {Parts(4), "pipeline { schedule: ZERO_BUBBLE_H1 }"}, kSkips), one);
  // The balancer's own partition.
  ExpectBitIdentical(Train(4, {}, kSkips), one);
  EXPECT_TRUE(Differs(one, Train(1, {"training { steps: 1 }"}, kSkips)));
}

TEST_F(SkipTest, VSchedulesHandTheLongSkipToTheSameRank) {
  const Weights one = Train(1, {}, kSkips);
  for (const char* schedule : {"ZERO_BUBBLE_V", "DUALPIPE_V"}) {
    SCOPED_TRACE(schedule);
    ExpectBitIdentical(
        Train(2, {Parts(4), absl::StrCat("pipeline { schedule: ", schedule, " }")}, kSkips), one);
  }
}

TEST_F(SkipTest, UserWrittenSchedulesCarryTheSkipsToo) {
  // PyTorch-format CSVs next to the plan: looped at K = 2 (parts 0, 1), V at K = 2 (parts 0..3,
  // rank 0 holding 0 and 3).
  const Weights one = Train(1, {}, kSkips);
  ExpectBitIdentical(
      Train(2, {Parts(2), "pipeline { schedule: CUSTOM schedule_csv: 'custom_1f1b_k2.csv' }"},
            kSkips),
      one);
  ExpectBitIdentical(
      Train(2, {Parts(4), "pipeline { schedule: CUSTOM schedule_csv: 'custom_v_k2.csv' }"}, kSkips),
      one);
}

TEST_F(SkipTest, Bf16StageCountsGiveBitIdenticalWeights) {
  const std::string bf16 = "training { precision: BF16 }";
  const Weights one = Train(1, {bf16}, kSkips);
  ExpectBitIdentical(Train(4, {bf16, Parts(4)}, kSkips), one);
  EXPECT_TRUE(Differs(one, Train(1, {}, kSkips)));
}

TEST_F(SkipTest, ReplicasOfAPipelineWithSkips) {
  const Weights single = Train(1, {}, kSkips);
  const Weights two_by_two = TrainReplicated(2, 2, {Parts(2)}, kSkips);
  const Weights two_replicas = TrainReplicated(1, 2, {}, kSkips);
  ExpectClose(two_by_two, single, 1e-5);
  ExpectBitIdentical(two_by_two, two_replicas);
}

TEST_F(SkipTest, PlanShowListsTheRoutes) {
  const testing::ProcessResult shown =
      testing::RunProcess({testing::BinPath("gpipe-plan"), "show", testing::SourcePath(kSkips),
                           "--override", absl::StrCat("pipeline { stages: 4 ", Parts(4).substr(11)),
                           "--override", "pipeline { stages: 4 }"},
                          60);
  ASSERT_EQ(shown.exit_code, 0) << shown.output;
  EXPECT_THAT(shown.output, HasSubstr("skip connections across stages"));
  EXPECT_THAT(shown.output, HasSubstr("add3 <- act1: stage 0 -> stage 3"));
}

}  // namespace
}  // namespace gpipe

// Every builder's output passes VerifyProgram for every shape its kind accepts in the ranges
// below (the exhaustive K <= 64, M <= 256 sweep is gpipe_schedule_sweep_test), and the shapes
// it does not accept are exactly the ones CheckScheduleShape documents.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/schedule/build_program.h"
#include "runtime/schedule/verifier.h"
#include "tests/schedule/schedule_test_util.h"

namespace gpipe::schedule {
namespace {

using ::gpipe::schedule::testing::ShapeName;
using ::gpipe::schedule::testing::VirtualStagesToTry;

// Builds and verifies one shape; false (with the failure recorded) when either step fails.
bool BuildsAndVerifies(pb::Schedule kind, int k, int m, int v) {
  const absl::StatusOr<Program> program = BuildProgram(kind, k, m, v);
  if (!program.ok()) {
    ADD_FAILURE() << ShapeName(kind, k, m, v) << ": " << program.status();
    return false;
  }
  const absl::StatusOr<VerifyResult> result = VerifyProgram(*program, OpCosts{});
  if (!result.ok()) {
    ADD_FAILURE() << ShapeName(kind, k, m, v) << ": " << result.status();
    return false;
  }
  return true;
}

TEST(BuildersVerifyTest, EveryKindVerifiesForUpTo8StagesAnd32MicroBatches) {
  for (pb::Schedule kind : AllSchedules()) {
    int verified = 0;
    for (int k = 1; k <= 8; ++k) {
      for (int m = 1; m <= 32; ++m) {
        for (int v : VirtualStagesToTry(kind)) {
          if (!CheckScheduleShape(kind, k, m, v).ok()) continue;
          ASSERT_TRUE(BuildsAndVerifies(kind, k, m, v));
          ++verified;
        }
      }
    }
    // Interleaved: K in 2..8, any M up to 32, v in 2..4.
    const int expected = kind == pb::INTERLEAVED_1F1B ? 3 * 7 * 32 : 8 * 32;
    EXPECT_EQ(verified, expected) << pb::Schedule_Name(kind);
  }
}

TEST(BuildersVerifyTest, EveryKindVerifiesForDeepPipelines) {
  for (pb::Schedule kind : AllSchedules()) {
    for (int k : {16, 32, 64}) {
      std::vector<int> micro_batch_counts = {k, 2 * k, 256};
      if (4 * k <= 256) micro_batch_counts.push_back(4 * k);
      for (int m : micro_batch_counts) {
        for (int v : VirtualStagesToTry(kind)) {
          ASSERT_TRUE(CheckScheduleShape(kind, k, m, v).ok()) << ShapeName(kind, k, m, v);
          ASSERT_TRUE(BuildsAndVerifies(kind, k, m, v));
        }
      }
    }
  }
}

}  // namespace
}  // namespace gpipe::schedule

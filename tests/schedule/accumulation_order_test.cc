// The order in which each stage accumulates parameter gradients over micro-batches: 0..M-1 per
// chunk for ONE_F_ONE_B, INTERLEAVED_1F1B and the zero-bubble schedules (where the weight
// gradients are accumulated by BackwardWeight, and the input-gradient pass also goes in order).
// The runtime relies on this for bit-identical parameters between these schedules: float sums
// depend on their order. (GPIPE goes M-1..0; its own test pins that.)
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/schedule/schedule_test_util.h"

namespace gpipe::schedule {
namespace {

using ::gpipe::schedule::testing::Ascending;
using ::gpipe::schedule::testing::BuildOk;
using ::gpipe::schedule::testing::MicroBatchOrder;
using ::gpipe::schedule::testing::ShapeName;
using ::gpipe::schedule::testing::VirtualStagesToTry;

TEST(AccumulationOrderTest, EveryTrainingScheduleButGpipeAccumulatesInMicroBatchOrder) {
  for (pb::Schedule kind :
       {pb::ONE_F_ONE_B, pb::INTERLEAVED_1F1B, pb::ZERO_BUBBLE_H1, pb::ZERO_BUBBLE_H2}) {
    for (int k = 1; k <= 8; ++k) {
      for (int m = 1; m <= 24; ++m) {
        for (int v : VirtualStagesToTry(kind)) {
          if (!CheckScheduleShape(kind, k, m, v).ok()) continue;
          const Program program = BuildOk(kind, k, m, v);
          const std::vector<std::vector<int>> in_order(v, Ascending(m));
          const std::vector<std::vector<int>> none(v);
          const bool split = kind == pb::ZERO_BUBBLE_H1 || kind == pb::ZERO_BUBBLE_H2;
          for (const StageProgram& stage : program.stage_programs) {
            const auto shape = [&] {
              return ShapeName(kind, k, m, v) + " stage " + std::to_string(stage.stage);
            };
            EXPECT_EQ(MicroBatchOrder<Forward>(stage, v), in_order) << shape();
            EXPECT_EQ(MicroBatchOrder<Backward>(stage, v), split ? none : in_order) << shape();
            EXPECT_EQ(MicroBatchOrder<BackwardInput>(stage, v), split ? in_order : none) << shape();
            EXPECT_EQ(MicroBatchOrder<BackwardWeight>(stage, v), split ? in_order : none)
                << shape();
          }
        }
      }
    }
  }
}

TEST(AccumulationOrderTest, EvalForwardsInMicroBatchOrderAndNeverBackwards) {
  const Program program = BuildOk(pb::EVAL, 4, 9);
  for (const StageProgram& stage : program.stage_programs) {
    EXPECT_EQ(MicroBatchOrder<Forward>(stage, 1), std::vector<std::vector<int>>{Ascending(9)});
    EXPECT_EQ(MicroBatchOrder<Backward>(stage, 1), std::vector<std::vector<int>>(1));
  }
}

}  // namespace
}  // namespace gpipe::schedule

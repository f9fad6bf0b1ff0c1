// LrSchedule: warm-up, constant, linear and cosine decay, the flat tail, and updates beyond
// decay_steps, at exact values.
#include "runtime/train/lr_schedule.h"

#include <cmath>
#include <numbers>

#include "gtest/gtest.h"

namespace gpipe {
namespace {

pb::Training Training(int64_t steps, int64_t warmup, pb::LrDecay decay, int64_t decay_steps,
                      double min_lr_ratio) {
  pb::Training training;
  training.set_steps(steps);
  pb::LrSchedule& schedule = *training.mutable_lr_schedule();
  schedule.set_warmup_steps(warmup);
  schedule.set_decay(decay);
  schedule.set_decay_steps(decay_steps);
  schedule.set_min_lr_ratio(min_lr_ratio);
  return training;
}

TEST(LrScheduleTest, WithoutAScheduleEveryUpdateGetsThePeak) {
  pb::Training training;
  training.set_steps(10);
  const LrSchedule schedule(training, 0.25);
  EXPECT_EQ(schedule.LrAt(0), 0.25);
  EXPECT_EQ(schedule.LrAt(9), 0.25);
  EXPECT_EQ(schedule.LrAt(1000), 0.25);
}

TEST(LrScheduleTest, WarmUpRisesLinearlyToThePeak) {
  const LrSchedule schedule(Training(100, 4, pb::CONSTANT, 0, 0), 2.0);
  EXPECT_EQ(schedule.LrAt(0), 0.5);
  EXPECT_EQ(schedule.LrAt(1), 1.0);
  EXPECT_EQ(schedule.LrAt(2), 1.5);
  EXPECT_EQ(schedule.LrAt(3), 2.0);
  EXPECT_EQ(schedule.LrAt(4), 2.0);
  // CONSTANT ignores min_lr_ratio and stays at the peak for ever.
  EXPECT_EQ(schedule.LrAt(500), 2.0);
}

TEST(LrScheduleTest, LinearDecayReachesTheFloorAtDecayStepsAndStaysThere) {
  // Warm-up 2, decay over updates 2..9 (8 updates) from 1.0 to 0.2.
  const LrSchedule schedule(Training(20, 2, pb::LINEAR, 10, 0.2), 1.0);
  EXPECT_EQ(schedule.LrAt(0), 0.5);
  EXPECT_EQ(schedule.LrAt(1), 1.0);
  EXPECT_EQ(schedule.LrAt(2), 1.0);                       // progress 0
  EXPECT_DOUBLE_EQ(schedule.LrAt(6), 1.0 - 0.8 * 0.5);    // progress 4/8
  EXPECT_DOUBLE_EQ(schedule.LrAt(9), 1.0 - 0.8 * 0.875);  // progress 7/8
  EXPECT_EQ(schedule.LrAt(10), 0.2);
  EXPECT_EQ(schedule.LrAt(19), 0.2);
  EXPECT_EQ(schedule.LrAt(1000), 0.2);
}

TEST(LrScheduleTest, CosineDecayFollowsHalfACosine) {
  const double peak = 3e-4;
  const LrSchedule schedule(Training(12, 0, pb::COSINE, 8, 0.1), peak);
  for (int64_t u = 0; u < 8; ++u) {
    const double progress = static_cast<double>(u) / 8.0;
    EXPECT_EQ(schedule.LrAt(u),
              peak * (0.1 + 0.9 * 0.5 * (1.0 + std::cos(std::numbers::pi * progress))))
        << "update " << u;
  }
  EXPECT_EQ(schedule.LrAt(0), peak);
  EXPECT_DOUBLE_EQ(schedule.LrAt(4), peak * 0.55);  // halfway: the mean of peak and floor
  EXPECT_EQ(schedule.LrAt(8), peak * 0.1);
  EXPECT_EQ(schedule.LrAt(11), peak * 0.1);
  EXPECT_EQ(schedule.LrAt(400), peak * 0.1);
}

TEST(LrScheduleTest, DecayStepsDefaultToTrainingSteps) {
  const LrSchedule schedule(Training(10, 0, pb::LINEAR, 0, 0), 1.0);
  EXPECT_DOUBLE_EQ(schedule.LrAt(5), 0.5);
  EXPECT_DOUBLE_EQ(schedule.LrAt(9), 0.1);
  EXPECT_EQ(schedule.LrAt(10), 0.0);
}

TEST(LrScheduleTest, WarmUpAsLongAsTheDecayGoesStraightToTheFloor) {
  const LrSchedule schedule(Training(4, 4, pb::COSINE, 4, 0.5), 1.0);
  EXPECT_EQ(schedule.LrAt(3), 1.0);
  EXPECT_EQ(schedule.LrAt(4), 0.5);
}

}  // namespace
}  // namespace gpipe

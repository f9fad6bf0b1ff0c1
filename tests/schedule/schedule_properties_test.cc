// What each schedule buys, measured by the verifier's simulation with the default unit costs
// (F = 1, BackwardInput = BackwardWeight = 1, so a whole Backward = 2; free transfers). Every
// stage then does 3 units of work per micro-batch and chunk, and:
//   GPIPE, ONE_F_ONE_B:  makespan 3(M+K-1)            bubble (K-1)/(M+K-1)
//   INTERLEAVED_1F1B:    makespan 3(vM+K-1)           bubble (K-1)/(vM+K-1)
//   ZERO_BUBBLE_H1,      makespan 3M+K-1 for M >= K   bubble (K-1)/(3M+K-1), about 1/3 of
//   ZERO_BUBBLE_H2:      2K+2M-1 for M < K            1F1B's and the least any schedule gets
//                                                     (stage K-1 starts at K-1)
//   EVAL:                makespan M+K-1               bubble (K-1)/(M+K-1)
// and peak live activations per stage: GPIPE M, ONE_F_ONE_B min(K-s, M), interleaved
// min(2(K-s-1)+(v-1)K+1, vM) chunk micro-batches, ZB-H1 min(K, M) (1F1B's stage-0 peak on
// every stage), ZB-H2 <= 2K-1-s, EVAL 0. H2's extra memory shortens the step
// only once transfers take time (ZeroBubbleH2BeatsH1WithTransferLatency).
#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/schedule/verifier.h"
#include "tests/schedule/schedule_test_util.h"

namespace gpipe::schedule {
namespace {

using ::gpipe::schedule::testing::BuildOk;
using ::gpipe::schedule::testing::ShapeName;
using ::gpipe::schedule::testing::VerifyOrFail;

constexpr double kTolerance = 1e-12;

VerifyResult Measure(pb::Schedule kind, int k, int m, int v = 1) {
  return VerifyOrFail(BuildOk(kind, k, m, v));
}

// Every stage does the same work, so every stage's bubble is makespan - work over makespan.
void ExpectMakespan(const VerifyResult& result, double makespan, double work_per_stage,
                    const std::string& shape) {
  EXPECT_DOUBLE_EQ(result.makespan, makespan) << shape;
  EXPECT_NEAR(result.bubble_fraction, (makespan - work_per_stage) / makespan, kTolerance) << shape;
}

TEST(SchedulePropertiesTest, FillDrainAndOneFOneBShareTheGpipeBubble) {
  for (int k = 1; k <= 8; ++k) {
    for (int m = 1; m <= 32; ++m) {
      for (pb::Schedule kind : {pb::GPIPE, pb::ONE_F_ONE_B}) {
        const VerifyResult result = Measure(kind, k, m);
        EXPECT_NEAR(result.bubble_fraction, static_cast<double>(k - 1) / (m + k - 1), kTolerance)
            << ShapeName(kind, k, m);
        ExpectMakespan(result, 3.0 * (m + k - 1), 3.0 * m, ShapeName(kind, k, m));
      }
    }
  }
}

TEST(SchedulePropertiesTest, EvalIsTheForwardHalfOfFillDrain) {
  for (int k = 1; k <= 8; ++k) {
    for (int m = 1; m <= 32; ++m) {
      const VerifyResult result = Measure(pb::EVAL, k, m);
      ExpectMakespan(result, m + k - 1, m, ShapeName(pb::EVAL, k, m));
      EXPECT_EQ(result.peak_live_activations, std::vector<int>(k, 0)) << ShapeName(pb::EVAL, k, m);
    }
  }
}

TEST(SchedulePropertiesTest, InterleavingDividesTheBubbleByTheChunkCount) {
  for (int k = 2; k <= 8; ++k) {
    for (int m = k; m <= 32; m += k) {
      const double one_f_one_b = Measure(pb::ONE_F_ONE_B, k, m).bubble_fraction;
      double previous = one_f_one_b;
      for (int v = 2; v <= 4; ++v) {
        const VerifyResult result = Measure(pb::INTERLEAVED_1F1B, k, m, v);
        const std::string shape = ShapeName(pb::INTERLEAVED_1F1B, k, m, v);
        EXPECT_NEAR(result.bubble_fraction, static_cast<double>(k - 1) / (v * m + k - 1),
                    kTolerance)
            << shape;
        ExpectMakespan(result, 3.0 * (v * m + k - 1), 3.0 * v * m, shape);
        EXPECT_LT(result.bubble_fraction, previous) << shape;  // more chunks, smaller bubble
        previous = result.bubble_fraction;
      }
    }
  }
}

// Both zero-bubble schedules' unit-cost makespan: the ramp bound 3M+K-1, or 2K+2M-1 when M < K.
double ZeroBubbleMakespan(int k, int m) { return m >= k ? 3.0 * m + k - 1 : 2.0 * k + 2 * m - 1; }

TEST(SchedulePropertiesTest, ZeroBubbleH1ReachesTheRampBoundAtOneFOneBFirstStageMemory) {
  for (int k = 1; k <= 8; ++k) {
    for (int m = 1; m <= 32; ++m) {
      const std::string shape = ShapeName(pb::ZERO_BUBBLE_H1, k, m);
      const VerifyResult result = Measure(pb::ZERO_BUBBLE_H1, k, m);
      ExpectMakespan(result, ZeroBubbleMakespan(k, m), 3.0 * m, shape);
      if (k > 1) {
        EXPECT_LT(result.bubble_fraction, Measure(pb::ONE_F_ONE_B, k, m).bubble_fraction) << shape;
      }
      EXPECT_EQ(result.peak_live_activations, std::vector<int>(k, std::min(k, m))) << shape;
    }
  }
}

TEST(SchedulePropertiesTest, ZeroBubbleH2MatchesH1WithFreeTransfersAtTwiceTheMemory) {
  for (int k = 1; k <= 8; ++k) {
    for (int m = 1; m <= 32; ++m) {
      const std::string shape = ShapeName(pb::ZERO_BUBBLE_H2, k, m);
      const VerifyResult result = Measure(pb::ZERO_BUBBLE_H2, k, m);
      ExpectMakespan(result, ZeroBubbleMakespan(k, m), 3.0 * m, shape);
      for (int s = 0; s < k; ++s) {
        EXPECT_LE(result.peak_live_activations[s], 2 * k - 1 - s) << shape << " stage " << s;
      }
    }
  }
}

// With a transfer latency of a quarter of a pass, H2's forwards further ahead of their
// backwards absorb round trips that H1 waits for: strictly shorter from M = 3 on (with M <= 2
// the two are the same order), never longer. Exact at K = 4, M = 16: H1 54, H2 52.5, 1F1B 64.
TEST(SchedulePropertiesTest, ZeroBubbleH2BeatsH1WithTransferLatency) {
  OpCosts costs;
  costs.send = 0.25;
  for (int k = 2; k <= 8; ++k) {
    for (int m = 1; m <= 32; ++m) {
      const std::string shape = ShapeName(pb::ZERO_BUBBLE_H2, k, m);
      const double h1 = VerifyOrFail(BuildOk(pb::ZERO_BUBBLE_H1, k, m), costs).makespan;
      const double h2 = VerifyOrFail(BuildOk(pb::ZERO_BUBBLE_H2, k, m), costs).makespan;
      if (m >= 3) {
        EXPECT_LT(h2, h1) << shape;
      } else {
        EXPECT_DOUBLE_EQ(h2, h1) << shape;
      }
    }
  }
  EXPECT_DOUBLE_EQ(VerifyOrFail(BuildOk(pb::ZERO_BUBBLE_H1, 4, 16), costs).makespan, 54);
  EXPECT_DOUBLE_EQ(VerifyOrFail(BuildOk(pb::ZERO_BUBBLE_H2, 4, 16), costs).makespan, 52.5);
  EXPECT_DOUBLE_EQ(VerifyOrFail(BuildOk(pb::ONE_F_ONE_B, 4, 16), costs).makespan, 64);
}

// The figures quoted in the schedule's documentation, at M = 4K: both zero-bubble schedules
// under 7.7% (their bound (K-1)/(13K-1) < 1/13), about a third of 1F1B's.
TEST(SchedulePropertiesTest, ZeroBubbleAtFourMicroBatchesPerStage) {
  for (int k : {2, 4, 8, 16, 32}) {
    const double one_f_one_b = Measure(pb::ONE_F_ONE_B, k, 4 * k).bubble_fraction;
    for (pb::Schedule kind : {pb::ZERO_BUBBLE_H1, pb::ZERO_BUBBLE_H2}) {
      const double zero_bubble = Measure(kind, k, 4 * k).bubble_fraction;
      EXPECT_LT(zero_bubble, 1.0 / 13) << ShapeName(kind, k, 4 * k);
      EXPECT_LT(zero_bubble, 0.4 * one_f_one_b) << ShapeName(kind, k, 4 * k);
    }
  }
}

TEST(SchedulePropertiesTest, PeakLiveActivationsPerSchedule) {
  for (int k = 1; k <= 8; ++k) {
    for (int m = 1; m <= 32; ++m) {
      const VerifyResult gpipe = Measure(pb::GPIPE, k, m);
      const VerifyResult one_f_one_b = Measure(pb::ONE_F_ONE_B, k, m);
      for (int s = 0; s < k; ++s) {
        EXPECT_EQ(gpipe.peak_live_activations[s], m) << ShapeName(pb::GPIPE, k, m);
        EXPECT_EQ(one_f_one_b.peak_live_activations[s], std::min(k - s, m))
            << ShapeName(pb::ONE_F_ONE_B, k, m) << " stage " << s;
      }
      if (k < 2 || m % k != 0) continue;
      for (int v = 2; v <= 4; ++v) {
        const VerifyResult interleaved = Measure(pb::INTERLEAVED_1F1B, k, m, v);
        for (int s = 0; s < k; ++s) {
          EXPECT_EQ(interleaved.peak_live_activations[s],
                    std::min(2 * (k - s - 1) + (v - 1) * k + 1, v * m))
              << ShapeName(pb::INTERLEAVED_1F1B, k, m, v) << " stage " << s;
        }
      }
    }
  }
}

}  // namespace
}  // namespace gpipe::schedule

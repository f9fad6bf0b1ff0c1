// TimelineFromSimulation: the simulator's step as a Timeline. Its bubbles must be the
// verifier's predictions exactly (the picture of a plan and `gpipe-plan show` agree), and its
// boxes the program's compute instructions with their kinds and chunks.
#include "runtime/trace/timeline_from_simulation.h"

#include "gtest/gtest.h"
#include "runtime/schedule/build_program.h"
#include "runtime/schedule/simulator.h"
#include "runtime/schedule/transfers.h"
#include "runtime/schedule/verifier.h"

namespace gpipe::trace {
namespace {

struct Simulated {
  schedule::Program program;
  schedule::VerifyResult verified;
  Timeline timeline;
};

Simulated SimulateSchedule(pb::Schedule kind, int stages, int micro_batches, int chunks = 1,
                           const schedule::OpCosts& costs = {}) {
  Simulated out;
  absl::StatusOr<schedule::Program> program =
      schedule::BuildProgram(kind, stages, micro_batches, chunks);
  EXPECT_TRUE(program.ok()) << program.status();
  out.program = *program;
  absl::StatusOr<schedule::VerifyResult> verified = schedule::VerifyProgram(out.program, costs);
  EXPECT_TRUE(verified.ok()) << verified.status();
  out.verified = *verified;
  absl::StatusOr<schedule::Simulation> simulation =
      schedule::Simulate(out.program, schedule::Transfers::Collect(out.program), costs);
  EXPECT_TRUE(simulation.ok()) << simulation.status();
  absl::StatusOr<Timeline> timeline = TimelineFromSimulation(out.program, *simulation);
  EXPECT_TRUE(timeline.ok()) << timeline.status();
  out.timeline = *timeline;
  return out;
}

int CountKind(const Timeline& timeline, BoxKind kind) {
  int count = 0;
  for (const TimelineBox& box : timeline.boxes) count += box.kind == kind ? 1 : 0;
  return count;
}

TEST(TimelineFromSimulationTest, GpipeBubbleEqualsTheVerifiersPrediction) {
  const Simulated s = SimulateSchedule(pb::GPIPE, 4, 8);
  const Timeline& timeline = s.timeline;
  EXPECT_EQ(timeline.unit, TimeUnit::kSimulated);
  EXPECT_EQ(timeline.schedule, "GPIPE");
  EXPECT_EQ(timeline.stages, 4);
  EXPECT_EQ(timeline.micro_batches, 8);
  EXPECT_DOUBLE_EQ(timeline.window_begin, 0);
  EXPECT_DOUBLE_EQ(timeline.window_end, s.verified.makespan);
  ASSERT_EQ(timeline.rows.size(), 4u);
  for (int stage = 0; stage < 4; ++stage) {
    EXPECT_NEAR(timeline.rows[stage].bubble, s.verified.stage_bubble[stage], 1e-12)
        << "stage " << stage;
    // Each stage forwards and backwards 8 micro-batches: 8 * (1 + 2) time units.
    EXPECT_NEAR(timeline.rows[stage].busy, 24.0, 1e-12);
  }
  EXPECT_NEAR(timeline.MeanBubble(), s.verified.bubble_fraction, 1e-12);
  ASSERT_TRUE(timeline.predicted_bubble.has_value());
  EXPECT_NEAR(*timeline.predicted_bubble, s.verified.bubble_fraction, 1e-12);
  // Uniform costs and free transfers: the GPipe paper's (K-1)/(M+K-1).
  EXPECT_NEAR(timeline.MeanBubble(), 3.0 / 11.0, 1e-12);
  // Loads cost nothing by default, so only the 2 * K * M compute boxes are drawn.
  EXPECT_EQ(CountKind(timeline, BoxKind::kForward), 32);
  EXPECT_EQ(CountKind(timeline, BoxKind::kBackward), 32);
  EXPECT_EQ(timeline.boxes.size(), 64u);
}

TEST(TimelineFromSimulationTest, BoxesAreTheProgramsComputeAtSimulatedTimes) {
  const Simulated s = SimulateSchedule(pb::GPIPE, 4, 8);
  // Fill: stage s forwards micro-batch m over [s + m, s + m + 1].
  for (const TimelineBox& box : s.timeline.boxes) {
    if (box.kind != BoxKind::kForward) continue;
    EXPECT_DOUBLE_EQ(box.begin, box.row + box.micro_batch) << box.name;
    EXPECT_DOUBLE_EQ(box.end, box.row + box.micro_batch + 1) << box.name;
    EXPECT_EQ(box.name, "F" + std::to_string(box.micro_batch));
  }
}

TEST(TimelineFromSimulationTest, ZeroBubbleSplitsBackwardIntoInputAndWeight) {
  const Simulated s = SimulateSchedule(pb::ZERO_BUBBLE_H1, 4, 8);
  EXPECT_EQ(CountKind(s.timeline, BoxKind::kBackwardInput), 32);
  EXPECT_EQ(CountKind(s.timeline, BoxKind::kBackwardWeight), 32);
  EXPECT_EQ(CountKind(s.timeline, BoxKind::kBackward), 0);
  EXPECT_NEAR(s.timeline.MeanBubble(), s.verified.bubble_fraction, 1e-12);
}

TEST(TimelineFromSimulationTest, InterleavedBoxesCarryTheirChunk) {
  const Simulated s = SimulateSchedule(pb::INTERLEAVED_1F1B, 2, 4, 2);
  EXPECT_EQ(s.timeline.chunks, 2);
  int chunk1 = 0;
  for (const TimelineBox& box : s.timeline.boxes) {
    if (box.chunk == 1) {
      ++chunk1;
      EXPECT_EQ(box.name.substr(box.name.size() - 2), ".1") << box.name;
    }
  }
  // Half of the 2 stages x 4 micro-batches x 2 chunks x (F, B) boxes.
  EXPECT_EQ(chunk1, 16);
  EXPECT_NEAR(s.timeline.MeanBubble(), s.verified.bubble_fraction, 1e-12);
}

TEST(TimelineFromSimulationTest, LoadsThatTakeTimeAreOtherBoxes) {
  schedule::OpCosts costs;
  costs.load = 0.25;
  const Simulated s = SimulateSchedule(pb::GPIPE, 2, 2, 1, costs);
  // The first stage loads inputs and the last targets: 2 micro-batches each.
  EXPECT_EQ(CountKind(s.timeline, BoxKind::kOther), 4);
  EXPECT_NEAR(s.timeline.MeanBubble(), s.verified.bubble_fraction, 1e-12);
}

TEST(TimelineFromSimulationTest, VerifyResultGivesTheSameTimeline) {
  const Simulated s = SimulateSchedule(pb::ONE_F_ONE_B, 4, 8);
  absl::StatusOr<Timeline> from_verifier = TimelineFromSimulation(s.program, s.verified);
  ASSERT_TRUE(from_verifier.ok()) << from_verifier.status();
  ASSERT_EQ(from_verifier->boxes.size(), s.timeline.boxes.size());
  for (size_t i = 0; i < s.timeline.boxes.size(); ++i) {
    EXPECT_EQ(from_verifier->boxes[i].name, s.timeline.boxes[i].name);
    EXPECT_EQ(from_verifier->boxes[i].row, s.timeline.boxes[i].row);
    EXPECT_DOUBLE_EQ(from_verifier->boxes[i].begin, s.timeline.boxes[i].begin);
  }
  EXPECT_DOUBLE_EQ(from_verifier->window_end, s.verified.makespan);
  EXPECT_TRUE(from_verifier->simulated);
  ASSERT_TRUE(from_verifier->predicted_bubble.has_value());
  EXPECT_DOUBLE_EQ(*from_verifier->predicted_bubble, s.verified.bubble_fraction);
  EXPECT_NEAR(from_verifier->MeanBubble(), s.verified.bubble_fraction, 1e-12);
}

TEST(TimelineFromSimulationTest, RejectsASimulationOfAnotherProgram) {
  absl::StatusOr<schedule::Program> program = schedule::BuildProgram(pb::GPIPE, 2, 2);
  ASSERT_TRUE(program.ok());
  schedule::Simulation simulation;
  simulation.makespan = 1;
  simulation.timeline.push_back({5, 0, 0.0, 1.0});
  absl::StatusOr<Timeline> timeline = TimelineFromSimulation(*program, simulation);
  ASSERT_FALSE(timeline.ok());
  EXPECT_EQ(timeline.status().message(),
            "the simulation does not belong to this program: it has an entry for stage 5, "
            "instruction #0");
}

}  // namespace
}  // namespace gpipe::trace

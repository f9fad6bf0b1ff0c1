// The core promise: pipelined training updates the weights exactly as single-process training
// on the same mini-batch does, whatever the number of stages, micro-batches or the
// re-materialization policy. Each case trains the same plan under mpirun and compares the
// exported parameters.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/core/file_io.h"
#include "tests/e2e/equivalence_harness.h"
#include "tests/support/file_fixtures.h"
#include "tests/support/process_runner.h"

namespace gpipe {
namespace {

using ::gpipe::testing::Weights;

// On the plan's own device, the CPU.
class EquivalenceTest : public testing::EquivalenceHarness {};

TEST_F(EquivalenceTest, StageCountsGiveBitIdenticalWeights) {
  const Weights one = Train(1, {});
  const Weights two = Train(2, {});
  const Weights four = Train(4, {});
  ExpectBitIdentical(two, one);
  ExpectBitIdentical(four, one);
}

TEST_F(EquivalenceTest, TrainingChangesTheWeights) {
  // Guards the comparisons above against a run that never updates anything.
  const Weights trained = Train(2, {});
  const Weights untrained = Train(2, {"training { steps: 1 optimizer { sgd { lr: 1e-30 } } }"});
  EXPECT_TRUE(Differs(trained, untrained));
}

TEST_F(EquivalenceTest, RematPoliciesGiveBitIdenticalWeights) {
  const Weights never = Train(3, {"pipeline { remat: NEVER }"});
  const Weights except_last = Train(3, {"pipeline { remat: EXCEPT_LAST }"});
  const Weights always = Train(3, {"pipeline { remat: ALWAYS }"});
  ExpectBitIdentical(except_last, never);
  ExpectBitIdentical(always, never);
  // Stage inputs waiting in host memory between forward and backward come back as they left.
  ExpectBitIdentical(Train(3, {"pipeline { remat: ALWAYS offload: STAGE_INPUTS }"}), never);
  ExpectBitIdentical(Train(3, {"pipeline { remat: EXCEPT_LAST offload: STAGE_INPUTS }"}), never);
}

TEST_F(EquivalenceTest, MicroBatchCountsAgreeWithinTolerance) {
  // One micro-batch is single-device training on the whole mini-batch; dropout masks are keyed
  // by sample, so splitting changes only the floating-point summation order.
  const Weights whole = Train(1, {"pipeline { micro_batches: 1 }"});
  const Weights eight = Train(4, {"pipeline { micro_batches: 8 }"});
  const Weights thirty_two = Train(2, {"pipeline { micro_batches: 32 remat: ALWAYS }"});
  ExpectClose(eight, whole, 1e-5);
  ExpectClose(thirty_two, whole, 1e-5);
}

TEST_F(EquivalenceTest, AdamAndAdamWAreStageInvariant) {
  for (const char* optimizer :
       {"adam { lr: 0.01 weight_decay: 0.01 }", "adamw { lr: 0.01 weight_decay: 0.1 }"}) {
    const std::string o = absl::StrCat("training { optimizer { ", optimizer, " } }");
    ExpectBitIdentical(Train(3, {o}), Train(1, {o}));
  }
}

TEST_F(EquivalenceTest, EverySchedulePerformsTheSameUpdate) {
  // GPIPE backwards micro-batches M-1..0; 1F1B, interleaved and zero-bubble all accumulate
  // 0..M-1, so they are bit-identical to single-process 1F1B and within rounding of GPIPE.
  const Weights fill_drain = Train(1, {});
  const Weights in_order = Train(1, {"pipeline { schedule: ONE_F_ONE_B }"});
  ExpectClose(in_order, fill_drain, 1e-5);
  struct Case {
    int stages;
    const char* pipeline;
  };
  const Case cases[] = {
      {2, "schedule: ONE_F_ONE_B"},
      {4, "schedule: ONE_F_ONE_B remat: ALWAYS"},
      // K=2: each rank's previous and next stage are the same peer, in both directions.
      {2, "schedule: INTERLEAVED_1F1B virtual_stages: 2"},
      {4, "schedule: INTERLEAVED_1F1B virtual_stages: 2 micro_batches: 8 remat: EXCEPT_LAST"},
      {2, "schedule: ZERO_BUBBLE_H1"},
      {4, "schedule: ZERO_BUBBLE_H1 remat: ALWAYS"},
      {2, "schedule: ZERO_BUBBLE_H2 remat: EXCEPT_LAST"},
      {3, "schedule: ZERO_BUBBLE_H2 micro_batches: 8"},
      // V placement: rank 0 holds the first and the last of 2K virtual stages; rank K-1 hands
      // its chunk 0's output to its chunk 1 locally.
      {2, "schedule: ZERO_BUBBLE_V"},
      {4, "schedule: ZERO_BUBBLE_V remat: ALWAYS"},
      {4, "schedule: ZERO_BUBBLE_V micro_batches: 8 remat: EXCEPT_LAST"},
      {2, "schedule: DUALPIPE_V"},                     // M = 2K: every phase runs
      {4, "schedule: DUALPIPE_V micro_batches: 8"},    // likewise at K = 4
      {4, "schedule: DUALPIPE_V remat: EXCEPT_LAST"},  // M < 2K: ZERO_BUBBLE_V's order
  };
  const Weights in_order_8 = Train(1, {"pipeline { schedule: ONE_F_ONE_B micro_batches: 8 }"});
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.stages, " stages, ", c.pipeline));
    const Weights weights = Train(c.stages, {absl::StrCat("pipeline { ", c.pipeline, " }")});
    const bool eight = absl::StrContains(c.pipeline, "micro_batches: 8");
    ExpectBitIdentical(weights, eight ? in_order_8 : in_order);
    ExpectClose(weights, fill_drain, 1e-5);
  }
}

TEST_F(EquivalenceTest, FewerMicroBatchesThanStagesPerformTheSameUpdate) {
  // M = 2 < K = 4; interleaving with M not a multiple of K.
  const Weights in_order = Train(1, {"pipeline { schedule: ONE_F_ONE_B micro_batches: 2 }"});
  for (const char* pipeline :
       {"schedule: INTERLEAVED_1F1B virtual_stages: 2", "schedule: ZERO_BUBBLE_V",
        "schedule: DUALPIPE_V", "schedule: ZERO_BUBBLE_H1"}) {
    SCOPED_TRACE(pipeline);
    ExpectBitIdentical(Train(4, {absl::StrCat("pipeline { ", pipeline, " micro_batches: 2 }")}),
                       in_order);
  }
}

TEST_F(EquivalenceTest, CustomSchedulesPerformTheSameUpdate) {
  // Every custom schedule below backwards each stage's micro-batches 0..M-1, so it is
  // bit-identical to single-process 1F1B.
  const Weights in_order = Train(1, {"pipeline { schedule: ONE_F_ONE_B }"});
  const char* const pipelines[] = {
      // A CSV file (relative to the plan's directory): 1F1B, with an OVERLAP_F_B pair and an
      // empty cell.
      "schedule: CUSTOM schedule_csv: \"custom_1f1b_k2.csv\"",
      // Looped placement, V = 4 on 2 ranks: rank 0 runs stages 0 and 2, rank 1 runs 1 and 3.
      "schedule: CUSTOM custom { "
      "ranks { actions: \"0F0 0F1 0F2 0F3 2F0 2F1 2F2 2F3 2B0 2B1 2B2 2B3 0B0 0B1 0B2 0B3\" } "
      "ranks { actions: \"1F0 1F1 1F2 1F3 3F0 3B0 3F1 3B1 3F2 3B2 3F3 3B3 1B0 1B1 1B2 1B3\" } }",
      // Split backward: I's in order, W's in order, some W's late.
      "schedule: CUSTOM custom { "
      "ranks { actions: \"0F0 0F1 0I0 0W0 0F2 0I1 0F3 0I2 0W1 0I3 0W2 0W3\" } "
      "ranks { actions: \"1F0 1I0 1F1 1I1 1W0 1F2 1I2 1W1 1F3 1I3 1W2 1W3\" } }",
      // V placement from a CSV file: rank 0 runs stages 0 and 3, rank 1 runs 1 and 2 (its
      // 1 -> 2 activations and 2 -> 1 gradients are local hand-offs).
      "schedule: CUSTOM schedule_csv: \"custom_v_k2.csv\"",
  };
  for (const char* pipeline : pipelines) {
    SCOPED_TRACE(pipeline);
    ExpectBitIdentical(Train(2, {absl::StrCat("pipeline { ", pipeline, " }")}), in_order);
  }
}

TEST_F(EquivalenceTest, ExportedScheduleTrainsLikeItsBuiltIn) {
  // gpipe-plan export-schedule writes ZB-H1 at K = 2 as a CSV; the plan with schedule: CUSTOM
  // reading that file runs the same program, so the same update.
  const std::string dir = testing::FreshTempDir();
  const std::string csv = dir + "/zb_h1.csv";
  const testing::ProcessResult exported =
      testing::RunProcess({testing::BinPath("gpipe-plan"), "export-schedule",
                           testing::SourcePath(testing::kEquivalencePlan), "-o", csv, "--override",
                           "pipeline { stages: 2 schedule: ZERO_BUBBLE_H1 }"},
                          60);
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const Weights in_order = Train(1, {"pipeline { schedule: ONE_F_ONE_B }"});
  ExpectBitIdentical(
      Train(2, {absl::StrCat("pipeline { schedule: CUSTOM schedule_csv: \"", csv, "\" }")}),
      in_order);
  const testing::ProcessResult show = testing::RunProcess(
      {testing::BinPath("gpipe-plan"), "show", testing::SourcePath(testing::kEquivalencePlan),
       "--override",
       absl::StrCat("pipeline { stages: 2 schedule: CUSTOM schedule_csv: \"", csv, "\" }")},
      60);
  ASSERT_EQ(show.exit_code, 0) << show.output;
  EXPECT_TRUE(absl::StrContains(show.output, "CUSTOM")) << show.output;
}

TEST_F(EquivalenceTest, ExportedVShapeScheduleRoundTrips) {
  // ZERO_BUBBLE_V at K = 4 exported as a CSV and read back as CUSTOM: the placement comes back
  // V_SHAPE from the stage ids, and the update is the built-in's, bit for bit.
  const std::string dir = testing::FreshTempDir();
  const std::string csv = dir + "/zbv.csv";
  const testing::ProcessResult exported =
      testing::RunProcess({testing::BinPath("gpipe-plan"), "export-schedule",
                           testing::SourcePath(testing::kEquivalencePlan), "-o", csv, "--override",
                           "pipeline { stages: 4 schedule: ZERO_BUBBLE_V }"},
                          60);
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const Weights built_in = Train(4, {"pipeline { schedule: ZERO_BUBBLE_V }"});
  ExpectBitIdentical(
      Train(4, {absl::StrCat("pipeline { schedule: CUSTOM schedule_csv: \"", csv, "\" }")}),
      built_in);
  ExpectBitIdentical(built_in, Train(1, {"pipeline { schedule: ONE_F_ONE_B }"}));
}

TEST_F(EquivalenceTest, PlanCheckRefusesABadScheduleCsvNamingRowAndAction) {
  const std::string dir = testing::FreshTempDir();
  const std::string csv = dir + "/bad.csv";
  ASSERT_TRUE(WriteFileAtomically(csv, "0F0,0F1,0B0,0B1\n1F0,1B0,1F1\n").ok());
  const testing::ProcessResult check = testing::RunProcess(
      {testing::BinPath("gpipe-plan"), "check", testing::SourcePath(testing::kEquivalencePlan),
       "--override",
       absl::StrCat("pipeline { stages: 2 micro_batches: 2 schedule: CUSTOM schedule_csv: \"", csv,
                    "\" }")},
      60);
  EXPECT_EQ(check.exit_code, 1) << check.output;
  EXPECT_TRUE(absl::StrContains(
      check.output, absl::StrCat("pipeline.schedule_csv: ", csv,
                                 ":1: action 3 (0B1): micro-batch 1's gradient for stage 0 comes "
                                 "from stage 1, whose backward (1B1, or 1I1 then 1W1) is never "
                                 "scheduled")))
      << check.output;
}

}  // namespace
}  // namespace gpipe

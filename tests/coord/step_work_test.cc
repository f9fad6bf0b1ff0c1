// What a step computes, from the plan and its parts, and the throughput it makes of a step's
// time: each stage sums its chunks' FLOPs for one replica's samples, tokens count only token-id
// inputs, and MFU is the ranks' mean rate over runtime.peak_tflops.
#include "runtime/coord/step_work.h"

#include <vector>

#include "gtest/gtest.h"

namespace gpipe {
namespace {

// 2 stages x 2 chunks (parts 0..3, part j on stage j % 2), 2 replicas, batch 16 (8 a replica).
pb::Setup InterleavedReplicatedSetup() {
  pb::Setup setup;
  pb::Plan& plan = *setup.mutable_plan();
  plan.mutable_pipeline()->set_stages(2);
  plan.mutable_pipeline()->set_virtual_stages(2);
  plan.mutable_pipeline()->set_data_parallel(2);
  plan.mutable_training()->set_global_batch(16);
  plan.mutable_model()->mutable_input()->add_shape(32);
  plan.mutable_model()->mutable_input()->set_type(pb::INT64);
  for (int part = 0; part < 4; ++part) {
    pb::StageSpec& spec = *setup.add_stages();
    spec.set_stage(part);
    spec.set_flops(100.0 * (part + 1));  // forward + backward per sample
  }
  return setup;
}

TEST(StepWorkTest, EachStageSumsItsChunksForOneReplicasSamples) {
  const StepWork work = StepWorkOf(InterleavedReplicatedSetup());
  // Stage 0 runs parts 0 and 2 (100 + 300), stage 1 parts 1 and 3 (200 + 400), on 8 samples.
  EXPECT_EQ(work.stage_flops, (std::vector<double>{3200.0, 4800.0}));
  EXPECT_EQ(work.tokens, 16 * 32);
  EXPECT_EQ(work.peak_tflops, 0.0);
}

TEST(StepWorkTest, FloatInputsHaveNoTokensAndThePeakComesFromTheRuntime) {
  pb::Setup setup = InterleavedReplicatedSetup();
  setup.mutable_plan()->mutable_model()->mutable_input()->set_type(pb::FLOAT32);
  setup.mutable_plan()->mutable_runtime()->set_peak_tflops(989);
  const StepWork work = StepWorkOf(setup);
  EXPECT_EQ(work.tokens, 0);
  EXPECT_EQ(work.peak_tflops, 989.0);
}

TEST(StepWorkTest, RatesAreEachRanksStageFlopsOverTheStepAndMfuTheirMeanOverThePeak) {
  const StepWork work{.stage_flops = {3e12, 5e12}, .tokens = 256000, .peak_tflops = 10};
  StepSummary summary;
  summary.step_ms = 2000;
  summary.stage = {0, 1, 0, 1};  // 2 replicas
  AddThroughput(work, summary);
  EXPECT_DOUBLE_EQ(summary.tokens_per_s, 128000.0);
  ASSERT_EQ(summary.tflops_per_rank.size(), 4u);
  EXPECT_DOUBLE_EQ(summary.tflops_per_rank[0], 1.5);
  EXPECT_DOUBLE_EQ(summary.tflops_per_rank[1], 2.5);
  EXPECT_DOUBLE_EQ(summary.tflops_per_rank[2], 1.5);
  EXPECT_DOUBLE_EQ(summary.tflops_per_rank[3], 2.5);
  EXPECT_DOUBLE_EQ(summary.mfu, 0.2);
}

TEST(StepWorkTest, WithoutTokensOrAPeakThoseStayUnset) {
  const StepWork work{.stage_flops = {4e9}};
  StepSummary summary;
  summary.step_ms = 8;
  summary.stage = {0};
  AddThroughput(work, summary);
  EXPECT_LT(summary.tokens_per_s, 0);
  EXPECT_LT(summary.mfu, 0);
  ASSERT_EQ(summary.tflops_per_rank.size(), 1u);
  EXPECT_DOUBLE_EQ(summary.tflops_per_rank[0], 0.5);  // 4 GFLOP in 8 ms
}

}  // namespace
}  // namespace gpipe

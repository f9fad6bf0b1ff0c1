// Pipeline x data parallelism keeps the core promise: D replicas of a K-stage pipeline, each on
// its share of the global batch with its gradients all-reduced in buckets, update the weights
// as one process does on the whole batch (same micro-batch size, so batch norm sees the same
// micro-batches; only the floating-point summation order differs). Each case trains under
// mpirun on K * D ranks and compares the exported parameters; the export itself checks that
// every replica holds bit-identical weights and buffers.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/e2e/equivalence_harness.h"
#include "tests/support/process_runner.h"

namespace gpipe {
namespace {

using ::gpipe::testing::Weights;

constexpr char kConvnet[] = "tests/e2e/testdata/convnet.pbtxt";
constexpr char kTinyLm[] = "tests/e2e/testdata/tiny_lm.pbtxt";
// The real models train with SGD here: they hold parameters whose gradient is zero in exact
// arithmetic (a bias before batch norm, attention's key bias), which Adam's normalization turns
// from rounding noise into full-size steps, so any change of summation order (one process
// against replicas) moves them by the learning rate. With SGD they stay at rounding level.
constexpr char kSgd[] = "training { optimizer { sgd { lr: 0.05 momentum: 0.9 } } }";

class DataParallelTest : public testing::EquivalenceHarness {
 protected:
  // equivalence.pbtxt: global batch 32, micro-batches of 8 samples whatever D.
  Weights Run(int stages, int replicas, const std::string& pipeline = "") {
    return TrainReplicated(
        stages, replicas,
        {absl::StrCat("pipeline { micro_batches: ", 4 / replicas, " ", pipeline, " }")});
  }
};

TEST_F(DataParallelTest, ReplicasAndStagesGiveTheSameWeights) {
  const Weights single = Run(1, 1);
  const Weights two_by_two = Run(2, 2);
  const Weights four_stages = Run(4, 1);
  const Weights two_replicas = Run(1, 2);
  ExpectBitIdentical(four_stages, single);
  ExpectClose(two_by_two, single, 1e-5);
  ExpectClose(two_replicas, single, 1e-5);
  // With two replicas every sum is a + b: the stage count changes nothing.
  ExpectBitIdentical(two_by_two, two_replicas);
  // Guards the comparisons against runs that never update anything.
  EXPECT_TRUE(Differs(two_by_two, TrainReplicated(2, 2,
                                                  {"training { steps: 1 optimizer { sgd { "
                                                   "lr: 1e-30 } } }"})));
}

TEST_F(DataParallelTest, EveryScheduleWithTwoReplicasOfTwoStages) {
  const Weights single = Run(1, 1);
  const Weights gpipe = Run(2, 2);
  for (const char* schedule :
       {"schedule: ONE_F_ONE_B", "schedule: INTERLEAVED_1F1B virtual_stages: 2",
        "schedule: ZERO_BUBBLE_H1", "schedule: ZERO_BUBBLE_H2 remat: ALWAYS",
        "schedule: ONE_F_ONE_B remat: EXCEPT_LAST", "schedule: ZERO_BUBBLE_V",
        "schedule: DUALPIPE_V remat: EXCEPT_LAST"}) {
    SCOPED_TRACE(schedule);
    const Weights weights = Run(2, 2, schedule);
    ExpectClose(weights, single, 1e-5);
    ExpectClose(weights, gpipe, 1e-5);
  }
}

TEST_F(DataParallelTest, BucketSizeDoesNotChangeTheUpdate) {
  // One bucket per layer (every all-reduce overlapping the backward) against one bucket for
  // the whole stage (started when the backward ends): the same sums.
  const Weights per_layer =
      TrainReplicated(2, 2, {"pipeline { micro_batches: 2 } runtime { gradient_bucket_bytes: 1 }"});
  const Weights whole = TrainReplicated(
      2, 2, {"pipeline { micro_batches: 2 } runtime { gradient_bucket_bytes: 1000000000 }"});
  ExpectBitIdentical(per_layer, whole);
}

TEST_F(DataParallelTest, BatchNormConvnetWithReplicas) {
  // Batch norm normalizes each micro-batch with its own statistics (4 samples either way), so
  // the parameters agree; the running statistics are averaged over the replicas (the export
  // checked that both replicas hold the same ones), which is not the single process's sequence.
  const Weights single = TrainReplicated(1, 1, {kSgd}, kConvnet);
  const Weights replicated = TrainReplicated(
      2, 2, {kSgd, "pipeline { micro_batches: 2 schedule: ONE_F_ONE_B }"}, kConvnet);
  ExpectClose(ParametersOnly(replicated), ParametersOnly(single), 1e-5);
  ASSERT_EQ(replicated.size(), single.size());
  EXPECT_TRUE(replicated.contains("bn1.running_mean"));
}

TEST_F(DataParallelTest, GraphsKeepTheWeightsBitForBitWithReplicas) {
  // runtime.cuda.graphs on the CPU (its recorded ops are the graphs' twin): steps 3 and 4 replay
  // the forwards and backwards captured in step 2, telling the replicas' gradient sync of each
  // accumulated layer after each launch; tied embeddings on the first and last stage, and an
  // evaluation between the steps, uncaptured.
  const std::string steps = "training { steps: 4 eval_every: 2 }";
  const std::string graphs = "runtime { cuda { graphs: true } }";
  for (int replicas : {1, 2}) {
    SCOPED_TRACE(absl::StrCat(replicas, " replica(s)"));
    ExpectBitIdentical(TrainReplicated(2, replicas, {steps, graphs}, kTinyLm),
                       TrainReplicated(2, replicas, {steps}, kTinyLm));
  }
}

TEST_F(DataParallelTest, TiedEmbeddingsAcrossStagesAndReplicas) {
  // embed.weight (stage 0) and head.weight (stage 1) are tied: each replica's copies are summed
  // over the replicas first, then over the tie inside the replica, once each.
  const Weights single = TrainReplicated(1, 1, {kSgd}, kTinyLm);
  const Weights replicated =
      TrainReplicated(2, 2, {kSgd, "pipeline { micro_batches: 2 }"}, kTinyLm);
  ExpectClose(replicated, single, 1e-5);
  ASSERT_TRUE(replicated.contains("embed.weight") && replicated.contains("head.weight"));
  EXPECT_EQ(replicated.at("embed.weight").values, replicated.at("head.weight").values);
}

// Runs gpipe-worker on `ranks` processes and returns what it printed.
testing::ProcessResult Launch(int ranks, const std::string& plan,
                              const std::vector<std::string>& overrides) {
  std::vector<std::string> argv = testing::MpirunPrefix(ranks);
  argv.insert(argv.end(), {testing::BinPath("gpipe-worker"), "--plan", testing::SourcePath(plan)});
  for (const std::string& o : overrides) argv.insert(argv.end(), {"--override", o});
  return testing::RunProcess(argv, 120);
}

// "eval after step 4 | loss 1.2345 | ..." -> the loss text.
std::string EvalLoss(const std::string& output) {
  const size_t at = output.find("eval after step 4 | loss ");
  return at == std::string::npos ? "" : output.substr(at + 25, 6);
}

TEST_F(DataParallelTest, EvaluationAndProgressLinesCountEveryReplica) {
  const std::string eval =
      "training { eval_every: 2 } data { synthetic { eval_samples: 20 } } runtime { log_every: 1 "
      "}";
  const testing::ProcessResult single =
      Launch(1, testing::kEquivalencePlan, {"pipeline { micro_batches: 4 }", eval});
  const testing::ProcessResult replicated =
      Launch(4, testing::kEquivalencePlan,
             {"pipeline { stages: 2 data_parallel: 2 micro_batches: 2 }", eval});
  ASSERT_EQ(single.exit_code, 0) << single.output;
  ASSERT_EQ(replicated.exit_code, 0) << replicated.output;
  // The held-out loss of (nearly) the same weights over the same 20 samples, 4 decimals.
  EXPECT_NE(EvalLoss(single.output), "");
  EXPECT_EQ(EvalLoss(replicated.output), EvalLoss(single.output)) << replicated.output;
  EXPECT_TRUE(absl::StrContains(replicated.output, "| 20 samples")) << replicated.output;
  EXPECT_TRUE(absl::StrContains(replicated.output, "2 replicas x 2 stages")) << replicated.output;
  EXPECT_TRUE(absl::StrContains(replicated.output, "| 2 replicas, all-reduce "))
      << replicated.output;
}

TEST_F(DataParallelTest, SimulatedReplicasReduceTheirBuckets) {
  // The simulated device models each bucket's all-reduce on the link beside the compute (the
  // overlap itself is checked on the CPU by e2e_trace_test and measured by
  // bench/data_parallel.sh).
  const testing::ProcessResult run =
      Launch(4, testing::kEquivalencePlan,
             {"pipeline { stages: 2 data_parallel: 2 micro_batches: 2 }",
              "runtime { device: SIM log_every: 1 gradient_bucket_bytes: 1 sim { peak_gflops: 0.01 "
              "} }"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "| 2 replicas, all-reduce ")) << run.output;
}

TEST_F(DataParallelTest, PlanToolPredictsTheAllReduce) {
  // 5 layers with parameters (416 + 792 + 48 + 384 + 85 floats = 6,900 bytes), a bucket each;
  // a ring over 2 replicas is 2 transfers of 10 us each on an (almost) infinitely fast link.
  const testing::ProcessResult show = testing::RunProcess(
      {testing::BinPath("gpipe-plan"), "show", testing::SourcePath(testing::kEquivalencePlan),
       "--override",
       "pipeline { stages: 1 data_parallel: 2 } runtime { device: SIM gradient_bucket_bytes: 1 "
       "sim { link_gbps: 1000000 link_latency_us: 10 } }"},
      60);
  ASSERT_EQ(show.exit_code, 0) << show.output;
  EXPECT_TRUE(absl::StrContains(show.output,
                                "data parallel: 2 replicas of the pipeline, 2 "
                                "processes"))
      << show.output;
  EXPECT_TRUE(absl::StrContains(show.output, "0            6.7 KiB        5  0.100"))
      << show.output;
}

TEST_F(DataParallelTest, WrongProcessCountNamesStagesAndReplicas) {
  const testing::ProcessResult run =
      Launch(2, testing::kEquivalencePlan, {"pipeline { stages: 2 data_parallel: 2 }"});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_FALSE(run.timed_out);
  EXPECT_TRUE(absl::StrContains(run.output, "the plan needs 4 processes (2 stages x 2 replicas"))
      << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "launch with -n 4 or set pipeline.data_parallel: 1"))
      << run.output;
}

TEST_F(DataParallelTest, IndivisibleBatchNamesReplicasAndMicroBatches) {
  const testing::ProcessResult run = Launch(
      4, testing::kEquivalencePlan, {"pipeline { stages: 2 data_parallel: 2 micro_batches: 3 }"});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(run.output, "not divisible by data_parallel 2 x micro_batches 3"))
      << run.output;
}

}  // namespace
}  // namespace gpipe

// The equivalence promise on the CUDA device: every rank on the one GPU (runtime.cuda.share_gpu),
// K = 1, 2, 4 ranks, data-parallel replicas and every schedule give the same weights within 1e-5
// relative, and the GPU agrees with the CPU reference after several steps within 1e-4; what one
// GPU allows of runtime.transport: NCCL; bf16 mixed precision. Skips where no GPU is visible.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/e2e/equivalence_harness.h"
#include "tests/e2e/gpu_presence.h"
#include "tests/support/process_runner.h"

namespace gpipe {
namespace {

using ::gpipe::testing::Weights;

class CudaEquivalenceTest : public testing::EquivalenceHarness {
 protected:
  void SetUp() override {
    if (testing::VisibleGpus() == 0) GTEST_SKIP() << "no GPU is visible to this process";
    device_override_ = testing::kOnSharedGpu;
  }
};

TEST_F(CudaEquivalenceTest, StageCountsSharingTheGpuAgree) {
  const Weights one = Train(1, {});
  const Weights two = Train(2, {});
  const Weights four = Train(4, {});
  ExpectClose(two, one, 1e-5);
  ExpectClose(four, one, 1e-5);
}

TEST_F(CudaEquivalenceTest, ReplicasSharingTheGpuAgree) {
  // Data parallelism on the GPU: buckets staged through pinned host memory and summed over MPI.
  const Weights one = TrainReplicated(1, 1, {"pipeline { micro_batches: 4 }"});
  const Weights two_by_two =
      TrainReplicated(2, 2, {"pipeline { micro_batches: 2 } runtime { gradient_bucket_bytes: 1 }"});
  const Weights one_by_two = TrainReplicated(1, 2, {"pipeline { micro_batches: 2 }"});
  ExpectClose(two_by_two, one, 1e-5);
  ExpectClose(one_by_two, one, 1e-5);
  // The optimizer state sharded over the replicas: the staged reduce-scatter and all-gather give
  // the unsharded update (two replicas: every sum is a + b either way).
  const std::string sharded = "training { shard_optimizer_state: true }";
  ExpectBitIdentical(TrainReplicated(2, 2,
                                     {"pipeline { micro_batches: 2 } runtime { "
                                      "gradient_bucket_bytes: 1 }",
                                      sharded}),
                     two_by_two);
  ExpectClose(TrainReplicated(1, 2, {"pipeline { micro_batches: 2 }", sharded}), one, 1e-5);
}

// Activation offload on the GPU: stage inputs copied to pinned host memory on the offload stream
// and back before their backward, overlapping the compute; the bytes come back as they left.
TEST_F(CudaEquivalenceTest, OffloadedStageInputsChangeNoBit) {
  const Weights kept = Train(2, {"pipeline { remat: ALWAYS }"});
  ExpectBitIdentical(Train(2, {"pipeline { remat: ALWAYS offload: STAGE_INPUTS }"}), kept);
  ExpectBitIdentical(Train(2, {"pipeline { remat: ALWAYS offload: STAGE_INPUTS schedule: "
                               "ONE_F_ONE_B }"}),
                     Train(2, {"pipeline { remat: ALWAYS schedule: ONE_F_ONE_B }"}));
}

TEST_F(CudaEquivalenceTest, TrainingChangesTheWeights) {
  const Weights trained = Train(2, {});
  const Weights untrained = Train(2, {"training { steps: 1 optimizer { sgd { lr: 1e-30 } } }"});
  EXPECT_TRUE(Differs(trained, untrained));
}

TEST_F(CudaEquivalenceTest, EverySchedulePerformsTheSameUpdate) {
  const Weights fill_drain = Train(1, {});
  const Weights in_order = Train(1, {"pipeline { schedule: ONE_F_ONE_B }"});
  ExpectClose(in_order, fill_drain, 1e-5);
  struct Case {
    int stages;
    const char* pipeline;
  };
  const Case cases[] = {
      {2, "schedule: GPIPE remat: ALWAYS"},
      {4, "schedule: GPIPE remat: EXCEPT_LAST"},
      {2, "schedule: ONE_F_ONE_B"},
      {4, "schedule: ONE_F_ONE_B remat: ALWAYS"},
      {2, "schedule: INTERLEAVED_1F1B virtual_stages: 2"},
      {4, "schedule: INTERLEAVED_1F1B virtual_stages: 2 micro_batches: 8 remat: EXCEPT_LAST"},
      {2, "schedule: ZERO_BUBBLE_H1"},
      {4, "schedule: ZERO_BUBBLE_H1 remat: ALWAYS"},
      {2, "schedule: ZERO_BUBBLE_H2 remat: EXCEPT_LAST"},
      {3, "schedule: ZERO_BUBBLE_H2 micro_batches: 8"},
      // V placement over NCCL: both kinds in each direction between neighbours, and rank K-1's
      // local hand-off between its chunks.
      {2, "schedule: ZERO_BUBBLE_V"},
      {4, "schedule: DUALPIPE_V micro_batches: 8"},
  };
  const Weights in_order_8 = Train(1, {"pipeline { schedule: ONE_F_ONE_B micro_batches: 8 }"});
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.stages, " stages, ", c.pipeline));
    const Weights weights = Train(c.stages, {absl::StrCat("pipeline { ", c.pipeline, " }")});
    const bool eight = absl::StrContains(c.pipeline, "micro_batches: 8");
    const bool gpipe = absl::StrContains(c.pipeline, "schedule: GPIPE");
    ExpectClose(weights, gpipe ? fill_drain : (eight ? in_order_8 : in_order), 1e-5);
    ExpectClose(weights, fill_drain, 1e-5);
  }
}

// Skip connections across stages on the GPU (tests/e2e/testdata/skips.pbtxt: a skip_concat of
// conv features, act1 read one, two and three stages on): every stage count within 1e-5 of one
// stage (the CUDA kernels are not bit-stable across partitions as the CPU's are), V placement's
// local hand-off too.
TEST_F(CudaEquivalenceTest, SkipConnectionsAcrossStages) {
  const std::string plan = "tests/e2e/testdata/skips.pbtxt";
  const Weights one = Train(1, {}, plan);
  ExpectClose(Train(4, {"pipeline { boundaries: ['fc2', 'act2', 'fc4'] }"}, plan), one, 1e-5);
  ExpectClose(
      Train(2, {"pipeline { boundaries: ['fc2', 'act2', 'fc4'] schedule: ZERO_BUBBLE_V }"}, plan),
      one, 1e-5);
  ExpectClose(
      Train(4, {"pipeline { boundaries: ['fc2', 'act2', 'fc4'] }", "training { precision: BF16 }"},
            plan),
      Train(1, {"training { precision: BF16 }"}, plan), 1e-2);
}

// runtime.transport: NCCL on the one GPU: a single stage (its channel made and its groups of one,
// no boundary). Pipelines across ranks need a GPU per rank under NCCL (below).
TEST_F(CudaEquivalenceTest, NcclTransportOnOneGpuPerformsTheSameUpdate) {
  if (!testing::NcclBuilt()) GTEST_SKIP() << "this build has no NCCL transport";
  const Weights over_mpi = Train(1, {});
  const Weights over_nccl = TrainOn("runtime { device: CUDA transport: NCCL }", 1, {});
  ExpectBitIdentical(over_nccl, over_mpi);
}

TEST_F(CudaEquivalenceTest, NcclRefusesRanksSharingTheGpuNamingTheMpiTransport) {
  if (!testing::NcclBuilt()) GTEST_SKIP() << "this build has no NCCL transport";
  std::vector<std::string> argv = testing::MpirunPrefix(2);
  argv.insert(argv.end(), {testing::BinPath("gpipe-worker"), "--plan",
                           testing::SourcePath(testing::kEquivalencePlan), "--override",
                           "pipeline { stages: 2 }", "--override",
                           "runtime { device: CUDA transport: NCCL cuda { share_gpu: true } }"});
  const testing::ProcessResult run = testing::RunProcess(argv, 120);
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_FALSE(run.timed_out) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "ranks 0 and 1 both compute on host")) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "use runtime { transport: MPI }")) << run.output;
}

// training.precision BF16 on the GPU (bf16 tensor-core products, bf16 boundaries over the
// host-staged MPI channel): stage counts agree, and the result tracks the CPU's bf16 run and the
// GPU's fp32 run within the tolerances bf16's 8 significant bits allow.
TEST_F(CudaEquivalenceTest, Bf16StageCountsAgreeAndTrackTheCpuAndFp32) {
  const std::vector<std::string> bf16 = {"training { precision: BF16 }"};
  const Weights one = Train(1, bf16);
  const Weights two = Train(2, bf16);
  const Weights four = Train(4, bf16);
  const Weights cpu = TrainOn("", 1, bf16);
  const Weights fp32 = Train(1, {});
  // The measured gaps, for the record (the bounds below are what bf16 allows).
  std::printf(
      "bf16 on the GPU: max relative difference K=2 vs K=1 %.3g, K=4 vs K=1 %.3g, "
      "GPU vs CPU %.3g, bf16 vs fp32 %.3g\n",
      MaxRelativeDifference(two, one), MaxRelativeDifference(four, one),
      MaxRelativeDifference(one, cpu), MaxRelativeDifference(one, fp32));
  ExpectClose(two, one, 1e-5);
  ExpectClose(four, one, 1e-5);
  ExpectClose(one, cpu, 2e-2);
  ExpectClose(one, fp32, 2e-2);
  EXPECT_TRUE(Differs(one, fp32));
}

TEST_F(CudaEquivalenceTest, AgreesWithTheCpuAfterSeveralSteps) {
  const std::vector<std::string> longer = {"training { steps: 12 }"};
  for (int stages : {1, 2}) {
    SCOPED_TRACE(absl::StrCat(stages, " stages"));
    const Weights cpu = TrainOn("", stages, longer);
    const Weights gpu = Train(stages, longer);
    ExpectClose(gpu, cpu, 1e-4);
  }
}

}  // namespace
}  // namespace gpipe

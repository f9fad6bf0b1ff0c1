// StageExecutor in one process: K stages on K threads exchanging tensors through a loopback
// channel (tests/exec/pipeline_harness.h). Pins the executor's own behaviour (equivalence across
// K and remat, gradient accumulation, memory held per policy, error context, skipped steps)
// without MPI.
#include "runtime/exec/stage_executor.h"

#include <cstdlib>
#include <map>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/exec/pipeline_harness.h"

namespace gpipe {
namespace {

using testing::ExpectSucceeded;
using testing::PipelineRun;
using testing::RunPipeline;

TEST(StageExecutorTest, StageCountsGiveBitIdenticalWeights) {
  const PipelineRun one = RunPipeline({.stages = 1});
  ExpectSucceeded(one);
  ASSERT_FALSE(one.weights.empty());
  for (int stages : {2, 3, 5}) {
    const PipelineRun many = RunPipeline({.stages = stages});
    for (const absl::Status& s : many.statuses) ASSERT_TRUE(s.ok()) << s;
    ASSERT_EQ(many.weights.size(), one.weights.size());
    for (const auto& [name, values] : one.weights) {
      EXPECT_EQ(many.weights.at(name), values) << name << " with " << stages << " stages";
    }
  }
}

TEST(StageExecutorTest, RematPoliciesGiveBitIdenticalWeights) {
  const PipelineRun never = RunPipeline({.stages = 2, .overrides = {"pipeline { remat: NEVER }"}});
  ExpectSucceeded(never);
  EXPECT_NE(never.weights, never.initial_weights);
  for (const char* policy : {"EXCEPT_LAST", "ALWAYS"}) {
    const PipelineRun other =
        RunPipeline({.stages = 2, .overrides = {absl::StrCat("pipeline { remat: ", policy, " }")}});
    ExpectSucceeded(other);
    EXPECT_EQ(other.weights, never.weights) << policy;
  }
}

TEST(StageExecutorTest, RematerializationBoundsActivationMemory) {
  // 8 micro-batches: without remat a stage holds all 8 micro-batches' activations; with ALWAYS
  // (and EXCEPT_LAST, whose one kept micro-batch is the last) about one micro-batch's. Every
  // policy keeps each micro-batch's stage input (boundary memory), and nothing outlives a step.
  const std::string m8 = "pipeline { micro_batches: 8 } training { global_batch: 32 }";
  std::map<std::string, PipelineRun> runs;
  for (const char* policy : {"NEVER", "EXCEPT_LAST", "ALWAYS"}) {
    runs[policy] = RunPipeline(
        {.stages = 2, .overrides = {m8, absl::StrCat("pipeline { remat: ", policy, " }")}});
    ExpectSucceeded(runs[policy]);
    for (int s = 0; s < 2; ++s) {
      // Nothing of a step outlives it.
      EXPECT_EQ(runs[policy].end_transient[s], 0) << policy << " stage " << s;
    }
  }
  for (int s = 0; s < 2; ++s) {
    EXPECT_GT(runs["NEVER"].peak_activation[s], runs["ALWAYS"].peak_activation[s]) << s;
    EXPECT_GT(runs["NEVER"].peak_activation[s], runs["EXCEPT_LAST"].peak_activation[s]) << s;
  }
  // On one stage holding all 7 layers the saved activations dominate: 8 micro-batches' worth
  // against one.
  const PipelineRun never =
      RunPipeline({.stages = 1, .overrides = {m8, "pipeline { remat: NEVER }"}});
  const PipelineRun always =
      RunPipeline({.stages = 1, .overrides = {m8, "pipeline { remat: ALWAYS }"}});
  ExpectSucceeded(never);
  ExpectSucceeded(always);
  EXPECT_GT(never.peak_activation[0], 4 * always.peak_activation[0])
      << never.peak_activation[0] << " vs " << always.peak_activation[0];
  // Stage 0 keeps 8 micro-batches x 4 samples x 6 input floats, the same whatever the policy
  // (gradient receives posted ahead count as boundary_grad).
  for (const char* policy : {"EXCEPT_LAST", "ALWAYS"}) {
    EXPECT_EQ(runs[policy].peak_boundary[0], runs["NEVER"].peak_boundary[0]) << policy;
  }
  EXPECT_GE(runs["NEVER"].peak_boundary[0], 8 * 4 * 6 * 4);
}

TEST(StageExecutorTest, ReportsCarryLossTimingAndMemory) {
  const PipelineRun run = RunPipeline({.stages = 3});
  ASSERT_EQ(run.last_reports.size(), 3u);
  for (const pb::StepReport& r : run.last_reports) {
    EXPECT_EQ(r.step(), 2);
    EXPECT_FALSE(r.non_finite());
    EXPECT_GT(r.step_ms(), 0.0);
    EXPECT_GE(r.step_ms(), r.busy_ms());
    EXPECT_GT(r.peak_bytes(), 0);
    EXPECT_EQ(r.has_loss(), r.stage() == 2);
    // Each link carries an activation one way and a gradient of the same shape back.
    EXPECT_GT(r.bytes_sent(), 0);
    EXPECT_EQ(r.bytes_sent(), r.bytes_received());
    if (r.stage() == 2) {
      EXPECT_GT(r.loss(), 0.0);
      EXPECT_LT(r.loss(), 3.0);
      EXPECT_GE(r.correct(), 0);
      EXPECT_LE(r.correct(), 16);
    }
  }
}

TEST(StageExecutorTest, TransferFailureNamesRankStageMicroBatchAndInstruction) {
  auto fault = [](int rank, int peer, const TransferKey& key) -> absl::Status {
    if (rank == 1 && key.kind == TransferKind::kActivation && key.micro_batch == 2) {
      return absl::DataLossError("injected");
    }
    return absl::OkStatus();
  };
  const PipelineRun run = RunPipeline({.stages = 2, .fault = fault, .wait_seconds = 1});
  ASSERT_FALSE(run.statuses[1].ok());
  EXPECT_TRUE(absl::StrContains(run.statuses[1].message(),
                                "rank 1, stage 1, step 0: instruction RecvActivation(mb=2)"))
      << run.statuses[1];
  EXPECT_TRUE(absl::StrContains(run.statuses[1].message(), "injected")) << run.statuses[1];
  // Stage 0 then waits for gradients that never come and gives up at its deadline.
  EXPECT_EQ(run.statuses[0].code(), absl::StatusCode::kDeadlineExceeded) << run.statuses[0];
}

// A class id out of range is found while the targets are host data, before their upload: the
// LoadMicroBatch instruction fails, naming rank, stage, step and micro-batch, and the loss's
// message names the sample, the id and the valid range. In BF16 too, where the loss is wrapped.
TEST(StageExecutorTest, BadClassIdFailsItsLoadNamingRankStageMicroBatchAndRange) {
  for (const char* precision : {"training { precision: FP32 }", "training { precision: BF16 }"})
  for (const int64_t bad : {int64_t{4}, int64_t{-1}}) {
    SCOPED_TRACE(precision);
    const PipelineRun run = RunPipeline(
        {.stages = 2, .overrides = {precision}, .bad_class_id = bad, .wait_seconds = 1});
    ASSERT_FALSE(run.statuses[1].ok());
    const std::string message(run.statuses[1].message());
    EXPECT_EQ(run.statuses[1].code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_TRUE(absl::StrContains(message, "rank 1, stage 1, step 0: instruction LoadMicroBatch("))
        << message;
    EXPECT_TRUE(absl::StrContains(
        message, absl::StrCat("softmax_cross_entropy: sample 1 of the batch has class id ", bad,
                              ", outside [0, 4)")))
        << message;
  }
}

// A token id outside the embedding's table is found while the ids are host data, before their
// upload: the first stage's LoadMicroBatch fails, naming rank, stage, step and micro-batch, and
// the embedding's message names the sample, position, id and valid range.
TEST(StageExecutorTest, BadTokenIdFailsItsLoadNamingRankStageMicroBatchPositionAndRange) {
  const char* source_dir = std::getenv("GPIPE_SOURCE_DIR");
  if (source_dir == nullptr) GTEST_SKIP() << "GPIPE_SOURCE_DIR is not set (ctest sets it)";
  // Byte-level text of the README (its letters are bytes >= 65) into a table of 64 rows.
  const std::string model = R"pb(
    model {
      input {
        shape: [ 8 ]
        type: INT64
      }
      layers {
        name: "embed"
        embedding { num_embeddings: 64 embedding_dim: 4 }
      }
      layers {
        name: "head"
        linear { out_features: 256 }
      }
    }
  )pb";
  const std::string data =
      absl::StrCat("data { text { paths: [\"", source_dir, "/README.md\"] } }");
  const PipelineRun run = RunPipeline({.stages = 2, .overrides = {model, data}, .wait_seconds = 1});
  ASSERT_FALSE(run.statuses[0].ok());
  const std::string message(run.statuses[0].message());
  EXPECT_EQ(run.statuses[0].code(), absl::StatusCode::kInvalidArgument) << message;
  for (const char* part :
       {"rank 0, stage 0, step 0: instruction LoadMicroBatch(", "embedding layer 'embed': sample ",
        " of micro-batch 0), position ", " has token id ",
        ", outside [0, 64); check the data or raise embedding.num_embeddings"}) {
    EXPECT_TRUE(absl::StrContains(message, part)) << part << " not in: " << message;
  }
}

TEST(StageExecutorTest, NonFiniteInputsSkipTheUpdateOnEveryStage) {
  const PipelineRun clean = RunPipeline({.stages = 2, .overrides = {"training { steps: 1 }"}});
  ExpectSucceeded(clean);
  const PipelineRun poisoned =
      RunPipeline({.stages = 2, .overrides = {"training { steps: 1 }"}, .poison_input = true});
  for (const absl::Status& s : poisoned.statuses) ASSERT_TRUE(s.ok()) << s;
  for (const pb::StepReport& r : poisoned.last_reports) EXPECT_TRUE(r.non_finite());
  // Skipped: the weights stay at their initial values, which training would have changed.
  EXPECT_EQ(poisoned.weights, poisoned.initial_weights);
  EXPECT_EQ(clean.initial_weights, poisoned.initial_weights);
  EXPECT_NE(clean.weights, clean.initial_weights);
}

}  // namespace
}  // namespace gpipe

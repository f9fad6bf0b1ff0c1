// Real models keep the core promise: a convnet with batch norm and a residual block, and a
// transformer language model with tied embeddings, update their weights (and batch norm's
// running statistics) bit for bit as single-stage training does, and evaluate the held-out
// split to the same numbers. Each case trains under mpirun and compares the exported tensors.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "runtime/ckpt/safetensors.h"
#include "tests/support/process_runner.h"
#include "tests/support/scratch_dir.h"

namespace gpipe {
namespace {

using Weights = std::map<std::string, NamedTensorData>;

struct Trained {
  Weights weights;
  std::vector<std::string> eval_lines;  // "eval after step ..." without the timing
};

class RealModelsTest : public ::testing::Test {
 protected:
  Trained Train(const std::string& plan, int stages, const std::vector<std::string>& overrides,
                int replicas = 1) {
    const std::string out = absl::StrCat(::gpipe::testing::ProcessScratchDir(), "/real_models_",
                                         counter_++, ".safetensors");
    std::vector<std::string> argv = testing::MpirunPrefix(stages * replicas);
    argv.insert(argv.end(),
                {testing::BinPath("gpipe-worker"), "--plan", testing::SourcePath(plan), "--export",
                 out, "--override",
                 absl::StrCat("pipeline { stages: ", stages, " data_parallel: ", replicas, " }")});
    for (const std::string& o : overrides) argv.insert(argv.end(), {"--override", o});
    const testing::ProcessResult run = testing::RunProcess(argv, 180);
    EXPECT_EQ(run.exit_code, 0) << run.output;
    EXPECT_FALSE(run.timed_out);
    Trained trained;
    auto read = ReadSafetensors(out);
    EXPECT_TRUE(read.ok()) << read.status() << "\n" << run.output;
    if (read.ok()) {
      for (NamedTensorData& t : *read) trained.weights[t.name] = std::move(t);
    }
    for (absl::string_view line : absl::StrSplit(run.output, '\n')) {
      const size_t at = line.find("eval after step");
      if (at == absl::string_view::npos) continue;
      // Drop the trailing "| N ms" (timing differs between runs).
      const size_t ms = line.rfind(" | ");
      trained.eval_lines.emplace_back(line.substr(at, ms - at));
    }
    return trained;
  }

  static void ExpectBitIdentical(const Weights& a, const Weights& b) {
    ASSERT_EQ(a.size(), b.size());
    ASSERT_FALSE(a.empty());
    for (const auto& [name, tensor] : a) {
      ASSERT_TRUE(b.contains(name)) << name;
      const NamedTensorData& other = b.at(name);
      ASSERT_EQ(tensor.shape, other.shape) << name;
      for (size_t i = 0; i < tensor.values.size(); ++i) {
        ASSERT_EQ(tensor.values[i], other.values[i]) << name << "[" << i << "]";
      }
    }
  }

  static double MaxRelativeDifference(const Weights& a, const Weights& b) {
    double worst = 0;
    for (const auto& [name, tensor] : a) {
      const NamedTensorData& other = b.at(name);
      double diff = 0, ref = 0;
      for (size_t i = 0; i < tensor.values.size(); ++i) {
        diff = std::max(diff, std::abs(double{tensor.values[i]} - other.values[i]));
        ref = std::max(ref, std::abs(double{other.values[i]}));
      }
      worst = std::max(worst, ref > 0 ? diff / ref : diff);
    }
    return worst;
  }

  int counter_ = 0;
};

constexpr char kConvnet[] = "tests/e2e/testdata/convnet.pbtxt";
constexpr char kTinyLm[] = "tests/e2e/testdata/tiny_lm.pbtxt";
constexpr char kTinyLlama[] = "tests/e2e/testdata/tiny_llama.pbtxt";

TEST_F(RealModelsTest, ConvnetStageCountsGiveBitIdenticalWeightsAndRunningStatistics) {
  const Trained one = Train(kConvnet, 1, {});
  const Trained four = Train(kConvnet, 4, {});
  ASSERT_TRUE(one.weights.contains("bn1.running_mean"));
  ASSERT_TRUE(one.weights.contains("block.bn.running_var"));
  ExpectBitIdentical(four.weights, one.weights);
  // Evaluated after steps 2 and 4, on 40 held-out samples (the last batch padded).
  ASSERT_EQ(one.eval_lines.size(), 2u);
  EXPECT_EQ(four.eval_lines, one.eval_lines);
  EXPECT_TRUE(absl::StrContains(one.eval_lines[1], "| 40 samples")) << one.eval_lines[1];
}

TEST_F(RealModelsTest, RematerializationDoesNotUpdateRunningStatisticsTwice) {
  // ALWAYS recomputes every micro-batch's forward before its backward; the replay must leave
  // the running statistics as NEVER does.
  const Trained never = Train(kConvnet, 2, {});
  const Trained always = Train(kConvnet, 2, {"pipeline { remat: ALWAYS }"});
  ExpectBitIdentical(always.weights, never.weights);
  EXPECT_EQ(always.eval_lines, never.eval_lines);
}

TEST_F(RealModelsTest, ConvnetSchedulesAgree) {
  // One SGD step: other schedules accumulate weight gradients over micro-batches in another
  // order, so sums differ in the last bits (Adam would amplify that over steps). Running
  // statistics are updated in forward order under every schedule: bit-identical.
  const std::string one_step = "training { steps: 1 optimizer { sgd { lr: 0.1 } } }";
  const Trained gpipe = Train(kConvnet, 2, {one_step});
  for (const char* schedule : {"ONE_F_ONE_B", "ZERO_BUBBLE_H1", "ZERO_BUBBLE_H2"}) {
    SCOPED_TRACE(schedule);
    const Trained other =
        Train(kConvnet, 2, {one_step, absl::StrCat("pipeline { schedule: ", schedule, " }")});
    EXPECT_LE(MaxRelativeDifference(other.weights, gpipe.weights), 1e-5);
    for (const char* buffer : {"bn1.running_mean", "bn1.running_var", "block.bn.running_var",
                               "bn2.running_mean"}) {
      EXPECT_EQ(other.weights.at(buffer).values, gpipe.weights.at(buffer).values) << buffer;
    }
  }
}

TEST_F(RealModelsTest, InterleavedChunksTrainAndEvaluate) {
  // Part j on stage j % 2 as chunk j / 2: the evaluation program runs the same four parts.
  const std::string one_step = "training { steps: 1 optimizer { sgd { lr: 0.1 } } }";
  const Trained single = Train(kConvnet, 1, {one_step});
  const Trained interleaved = Train(
      kConvnet, 2, {one_step, "pipeline { schedule: INTERLEAVED_1F1B virtual_stages: 2 }"});
  EXPECT_LE(MaxRelativeDifference(interleaved.weights, single.weights), 1e-5);
  EXPECT_EQ(interleaved.weights.at("bn2.running_var").values,
            single.weights.at("bn2.running_var").values);
  ASSERT_EQ(interleaved.eval_lines.size(), 1u);
  EXPECT_TRUE(absl::StrContains(interleaved.eval_lines[0], "| 40 samples"));
}

TEST_F(RealModelsTest, TiedLanguageModelStageCountsGiveBitIdenticalWeights) {
  const Trained one = Train(kTinyLm, 1, {});
  const Trained two = Train(kTinyLm, 2, {});
  const Trained four = Train(kTinyLm, 4, {});
  ExpectBitIdentical(two.weights, one.weights);
  ExpectBitIdentical(four.weights, one.weights);
  // The tie holds across ranks: the embedding (stage 0) and the head (stage 3) stay equal.
  EXPECT_EQ(four.weights.at("embed.weight").values, four.weights.at("head.weight").values);
  ASSERT_EQ(one.eval_lines.size(), 1u);
  EXPECT_TRUE(absl::StrContains(one.eval_lines[0], "bits/byte")) << one.eval_lines[0];
  EXPECT_EQ(four.eval_lines, one.eval_lines);
}

TEST_F(RealModelsTest, TrainingChangesTiedWeights) {
  // Guards the comparisons above against runs that never update the tied pair.
  const Trained trained = Train(kTinyLm, 2, {});
  const Trained barely = Train(kTinyLm, 2, {"training { steps: 1 optimizer { sgd { lr: 1e-30 } } }"});
  EXPECT_NE(trained.weights.at("head.weight").values, barely.weights.at("head.weight").values);
}

TEST_F(RealModelsTest, LlamaStageCountsAndSchedulesGiveBitIdenticalWeights) {
  const Trained one = Train(kTinyLlama, 1, {});
  ASSERT_TRUE(one.weights.contains("model.layers.1.self_attn.k_proj.weight"));
  ASSERT_TRUE(one.weights.contains("model.norm.weight"));
  const Trained four = Train(kTinyLlama, 4, {});
  ExpectBitIdentical(four.weights, one.weights);
  ASSERT_EQ(one.eval_lines.size(), 1u);
  EXPECT_EQ(four.eval_lines, one.eval_lines);
  // GPIPE backwards the micro-batches M-1..0, the others 0..M-1: they equal single-process
  // 1F1B bit for bit. Zero-bubble splits the RMS norms' and the head's backward (their weight
  // gradients wait for W); the blocks run whole in B.
  const std::string in_order = "pipeline { schedule: ONE_F_ONE_B }";
  const Trained one_in_order = Train(kTinyLlama, 1, {in_order});
  ExpectBitIdentical(Train(kTinyLlama, 2, {in_order}).weights, one_in_order.weights);
  ExpectBitIdentical(Train(kTinyLlama, 4, {"pipeline { schedule: ZERO_BUBBLE_H1 }"}).weights,
                     one_in_order.weights);
  ExpectBitIdentical(
      Train(kTinyLlama, 2, {"pipeline { schedule: ZERO_BUBBLE_H2 remat: ALWAYS }"}).weights,
      one_in_order.weights);
  EXPECT_LT(MaxRelativeDifference(one_in_order.weights, one.weights), 1e-4);
}

TEST_F(RealModelsTest, LlamaReplicasOfAnyStageCountGiveBitIdenticalWeights) {
  // Two replicas, each on half of every mini-batch in two micro-batches: every gradient sum over
  // the replicas is a + b, so the stage count changes nothing. (Against one process the
  // summation order differs; AdamW's normalization makes that rounding visible, see
  // data_parallel_test.cc for the SGD comparison.)
  const std::vector<std::string> half = {"pipeline { micro_batches: 2 }"};
  const Trained one_stage = Train(kTinyLlama, 1, half, /*replicas=*/2);
  const Trained two_stages = Train(kTinyLlama, 2, half, /*replicas=*/2);
  ExpectBitIdentical(two_stages.weights, one_stage.weights);
  const Trained single = Train(kTinyLlama, 1, {});
  EXPECT_LT(MaxRelativeDifference(one_stage.weights, single.weights), 1e-3);
}

TEST_F(RealModelsTest, LlamaTrainingChangesEveryParameter) {
  // Guards the comparisons above against runs that leave a parameter alone.
  const Trained trained = Train(kTinyLlama, 2, {});
  const Trained barely = Train(
      kTinyLlama, 2,
      {"training { steps: 1 optimizer { sgd { lr: 1e-30 } } lr_schedule { warmup_steps: 0 } }"});
  ASSERT_EQ(trained.weights.size(), barely.weights.size());
  for (const auto& [name, tensor] : trained.weights) {
    EXPECT_NE(tensor.values, barely.weights.at(name).values) << name;
  }
}

}  // namespace
}  // namespace gpipe

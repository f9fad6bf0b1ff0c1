// Real data through real jobs: .npy inputs and targets (regression), non-finite samples that
// make every rank skip the same steps, a data error on one rank that stops every rank, and
// weights that go out with --export and come back with --init-from.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "layers/registry.h"
#include "runtime/ckpt/hf_checkpoint.h"
#include "runtime/ckpt/safetensors.h"
#include "runtime/core/bf16.h"
#include "runtime/core/json.h"
#include "runtime/core/rng.h"
#include "runtime/data/npy.h"
#include "runtime/estimate/resolve_plan.h"
#include "tests/support/process_runner.h"
#include "tests/support/scratch_dir.h"

namespace gpipe {
namespace {

constexpr int64_t kSamples = 48;
constexpr int64_t kInputs = 5;
constexpr int64_t kOutputs = 3;

// A fresh directory holding a regression data set (targets = a smooth function of the inputs)
// and a plan that reads it through relative paths.
class NpyJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_.path();
    std::filesystem::create_directories(dir_ + "/data");
    RandomStream stream(3, {1});
    inputs_.resize(kSamples * kInputs);
    for (float& v : inputs_) v = static_cast<float>(stream.NextNormal());
    targets_.resize(kSamples * kOutputs);
    for (int64_t i = 0; i < kSamples; ++i) {
      for (int64_t o = 0; o < kOutputs; ++o) {
        targets_[i * kOutputs + o] =
            std::sin(inputs_[i * kInputs + o]) + 0.5f * inputs_[i * kInputs + o + 2];
      }
    }
  }

  void WriteData(const std::vector<float>& inputs) {
    ASSERT_TRUE(WriteNpy(dir_ + "/data/x.npy", Shape{kSamples, kInputs}, inputs).ok());
    ASSERT_TRUE(WriteNpy(dir_ + "/data/y.npy", Shape{kSamples, kOutputs}, targets_).ok());
  }

  std::string WritePlan(const std::string& extra = "") {
    const std::string path = dir_ + "/plan.pbtxt";
    std::ofstream(path) << R"pb(
          name: "npy-regression"
          model {
            input { shape: [ 5 ] }
            layers {
              name: "fc1"
              linear { out_features: 16 }
            }
            layers {
              name: "act1"
              tanh {}
            }
            layers {
              name: "fc2"
              linear { out_features: 16 }
            }
            layers {
              name: "norm2"
              layer_norm {}
            }
            layers {
              name: "act2"
              gelu {}
            }
            layers {
              name: "fc3"
              linear { out_features: 3 }
            }
            loss { mse {} }
          }
          pipeline { stages: 1 micro_batches: 4 remat: ALWAYS }
          training {
            global_batch: 16
            steps: 12
            seed: 5
            optimizer { adamw { lr: 0.01 } }
          }
          data {
            npy { inputs: "data/x.npy" targets: "data/y.npy" }
            shuffle: false
          }
          runtime {
            log_every: 1
            timeouts { wait_seconds: 30 }
          }
        )pb" << extra;
    return path;
  }

  testing::ProcessResult Run(int stages, const std::string& plan,
                             const std::vector<std::string>& flags) {
    std::vector<std::string> argv = testing::MpirunPrefix(stages);
    argv.insert(argv.end(), {testing::BinPath("gpipe-worker"), "--plan", plan, "--override",
                             absl::StrCat("pipeline { stages: ", stages, " }")});
    argv.insert(argv.end(), flags.begin(), flags.end());
    return testing::RunProcess(argv, 120);
  }

  std::vector<std::string> MetricsLines(const std::string& path) {
    std::ifstream in(path);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }

  const testing::ScratchDir scratch_;  // this test's own, removed after it
  std::string dir_;
  std::vector<float> inputs_;
  std::vector<float> targets_;
};

double LossOf(const std::string& line) {
  const size_t at = line.find("\"loss\":");
  return at == std::string::npos ? NAN : std::stod(line.substr(at + 7));
}

TEST_F(NpyJobTest, NpyRegressionTrainsAndIsStageInvariant) {
  WriteData(inputs_);
  const std::string plan = WritePlan();
  const std::string one = dir_ + "/one.safetensors", three = dir_ + "/three.safetensors";
  const std::string metrics = dir_ + "/metrics.jsonl";
  const testing::ProcessResult a = Run(1, plan, {"--export", one, "--metrics-out", metrics});
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const testing::ProcessResult b = Run(3, plan, {"--export", three});
  ASSERT_EQ(b.exit_code, 0) << b.output;
  auto wa = ReadSafetensors(one);
  auto wb = ReadSafetensors(three);
  ASSERT_TRUE(wa.ok() && wb.ok());
  ASSERT_EQ(wa->size(), wb->size());
  for (size_t i = 0; i < wa->size(); ++i) {
    EXPECT_EQ((*wa)[i].name, (*wb)[i].name);
    EXPECT_EQ((*wa)[i].values, (*wb)[i].values) << (*wa)[i].name;
  }
  const std::vector<std::string> lines = MetricsLines(metrics);
  ASSERT_EQ(lines.size(), 12u);
  EXPECT_LT(LossOf(lines.back()), 0.7 * LossOf(lines.front())) << lines.front() << "\n"
                                                               << lines.back();
}

TEST_F(NpyJobTest, NonFiniteSamplesSkipTheSameStepsOnEveryRank) {
  std::vector<float> poisoned = inputs_;
  poisoned[20 * kInputs + 1] = NAN;  // sample 20: in steps 1 and 4 (16 samples a step, N = 48)
  WriteData(poisoned);
  const std::string metrics = dir_ + "/metrics.jsonl";
  const testing::ProcessResult run =
      Run(3, WritePlan(), {"--metrics-out", metrics, "--override", "training { steps: 6 }"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::vector<std::string> lines = MetricsLines(metrics);
  ASSERT_EQ(lines.size(), 6u);
  for (int step = 0; step < 6; ++step) {
    const bool skipped = step == 1 || step == 4;
    EXPECT_EQ(absl::StrContains(lines[step], "\"applied\":false"), skipped) << lines[step];
  }
  EXPECT_TRUE(absl::StrContains(run.output, "SKIPPED")) << run.output;
  // Every rank skipped: 2 steps whose second is skipped export exactly what 1 step does.
  const std::string one = dir_ + "/one.safetensors", two = dir_ + "/two.safetensors";
  ASSERT_EQ(Run(3, WritePlan(), {"--export", one, "--override", "training { steps: 1 }"}).exit_code,
            0);
  ASSERT_EQ(Run(3, WritePlan(), {"--export", two, "--override", "training { steps: 2 }"}).exit_code,
            0);
  auto a = ReadSafetensors(one);
  auto b = ReadSafetensors(two);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), b->size());
  for (size_t i = 0; i < a->size(); ++i) EXPECT_EQ((*a)[i].values, (*b)[i].values) << (*a)[i].name;
}

TEST_F(NpyJobTest, NonFiniteSampleOfOneReplicaSkipsTheStepOnEveryReplica) {
  std::vector<float> poisoned = inputs_;
  // Sample 28: position 12 of steps 1 and 4 (16 samples a step), in replica 1's half.
  poisoned[28 * kInputs + 1] = NAN;
  WriteData(poisoned);
  const std::string metrics = dir_ + "/metrics.jsonl";
  std::vector<std::string> argv = testing::MpirunPrefix(4);
  argv.insert(argv.end(),
              {testing::BinPath("gpipe-worker"), "--plan", WritePlan(), "--metrics-out", metrics,
               "--override", "pipeline { stages: 2 data_parallel: 2 micro_batches: 2 }",
               "--override", "training { steps: 6 }"});
  const testing::ProcessResult run = testing::RunProcess(argv, 120);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::vector<std::string> lines = MetricsLines(metrics);
  ASSERT_EQ(lines.size(), 6u);
  for (int step = 0; step < 6; ++step) {
    const bool skipped = step == 1 || step == 4;
    EXPECT_EQ(absl::StrContains(lines[step], "\"applied\":false"), skipped) << lines[step];
    EXPECT_TRUE(absl::StrContains(lines[step], "\"replicas\":2")) << lines[step];
  }
  EXPECT_TRUE(absl::StrContains(run.output, "SKIPPED")) << run.output;
}

TEST_F(NpyJobTest, DataErrorOnTheLastStageStopsEveryRank) {
  WriteData(inputs_);
  // Targets of the wrong shape for the model's output: only the last stage opens them.
  ASSERT_TRUE(
      WriteNpy(dir_ + "/data/y.npy", Shape{kSamples, 2}, std::vector<float>(kSamples * 2, 0.0f))
          .ok());
  const testing::ProcessResult run = Run(3, WritePlan(), {});
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_FALSE(run.timed_out) << run.output;
  EXPECT_LT(run.seconds, 30.0) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "[gpipe r2] error:")) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "y.npy")) << run.output;
}

TEST_F(NpyJobTest, ExportedWeightsComeBackWithInitFrom) {
  WriteData(inputs_);
  const std::string plan = WritePlan();
  const std::string trained = dir_ + "/trained.safetensors";
  const std::string reloaded = dir_ + "/reloaded.safetensors";
  ASSERT_EQ(Run(2, plan, {"--export", trained}).exit_code, 0);
  // One step with a learning rate far below any weight's resolution: the export must be the
  // loaded weights, bit for bit, on a different partition.
  const testing::ProcessResult run =
      Run(3, plan,
          {"--init-from", trained, "--export", reloaded, "--override",
           "training { steps: 1 optimizer { sgd { lr: 1e-30 } } }"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto a = ReadSafetensors(trained);
  auto b = ReadSafetensors(reloaded);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), b->size());
  for (size_t i = 0; i < a->size(); ++i) EXPECT_EQ((*a)[i].values, (*b)[i].values) << (*a)[i].name;
  // A file missing a parameter is rejected before training (each rank loads its own stage's
  // parameters from it, so the file must be readable on every rank).
  ASSERT_TRUE(WriteSafetensors(dir_ + "/partial.safetensors", {(*a)[0]}, {}).ok());
  const testing::ProcessResult partial =
      Run(2, plan, {"--init-from", dir_ + "/partial.safetensors"});
  EXPECT_NE(partial.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(partial.output, "is not in the checkpoint")) << partial.output;
}

// data.tokens holding a text's bytes as UINT16 or UINT32 ids gives the same windows as data.text
// on that text, so the trained weights are the same bits; and an id past the vocabulary is
// refused by the plan check naming the file and offset, before any rank starts. A token run's
// progress line and metrics carry tokens/s, each rank's TFLOP/s and the MFU.
class TokensJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_.path();
    std::string text;
    for (int i = 0; i < 3000; ++i) text.push_back(static_cast<char>('a' + (i * 7 + i / 13) % 26));
    std::ofstream(dir_ + "/corpus.txt", std::ios::binary) << text;
    for (int width : {2, 4}) {
      std::string ids;
      for (char c : text) {
        ids.push_back(c);
        ids.append(width - 1, '\0');
      }
      std::ofstream(absl::StrCat(dir_, "/corpus.u", width * 8), std::ios::binary) << ids;
    }
    plan_ = dir_ + "/plan.pbtxt";
    std::ofstream(plan_) << R"pb(
      model {
        input {
          shape: [ 16 ]
          type: INT64
        }
        layers {
          name: "embed"
          embedding { num_embeddings: 256 embedding_dim: 16 }
        }
        layers {
          name: "pos"
          positional_embedding { max_positions: 16 }
        }
        layers {
          name: "h0"
          transformer_block { num_heads: 2 }
        }
        layers {
          name: "h1"
          transformer_block { num_heads: 2 }
        }
        layers {
          name: "head"
          linear { out_features: 256 }
        }
        loss { softmax_cross_entropy {} }
      }
      pipeline { stages: 1 micro_batches: 2 }
      training {
        global_batch: 8
        steps: 3
        seed: 5
        optimizer { adamw { lr: 0.01 } }
      }
      data {
        text { paths: "corpus.txt" eval_fraction: 0.1 }
        shuffle: true
      }
      runtime {
        device: CPU
        transport: MPI
        timeouts { wait_seconds: 30 }
      }
    )pb";
  }

  testing::ProcessResult Run(int stages, const std::vector<std::string>& flags) {
    std::vector<std::string> argv = testing::MpirunPrefix(stages);
    argv.insert(argv.end(), {testing::BinPath("gpipe-worker"), "--plan", plan_, "--override",
                             absl::StrCat("pipeline { stages: ", stages, " }")});
    argv.insert(argv.end(), flags.begin(), flags.end());
    return testing::RunProcess(argv, 120);
  }

  const testing::ScratchDir scratch_;
  std::string dir_, plan_;
};

TEST_F(TokensJobTest, TokenFilesOfTheBytesTrainLikeTheText) {
  const testing::ProcessResult text = Run(2, {"--export", dir_ + "/text.st"});
  ASSERT_EQ(text.exit_code, 0) << text.output;
  auto reference = ReadSafetensors(dir_ + "/text.st");
  ASSERT_TRUE(reference.ok()) << reference.status();
  for (const char* dtype : {"UINT16", "UINT32"}) {
    SCOPED_TRACE(dtype);
    const std::string out = absl::StrCat(dir_, "/", dtype, ".st");
    const std::string data =
        absl::StrCat("data { tokens { path: \"corpus.u", dtype[4] == '1' ? 16 : 32,
                     "\" dtype: ", dtype, " eval_fraction: 0.1 } }");
    const testing::ProcessResult tokens = Run(2, {"--override", data, "--export", out});
    ASSERT_EQ(tokens.exit_code, 0) << tokens.output;
    auto trained = ReadSafetensors(out);
    ASSERT_TRUE(trained.ok()) << trained.status();
    ASSERT_EQ(trained->size(), reference->size());
    for (size_t i = 0; i < trained->size(); ++i) {
      EXPECT_EQ((*trained)[i].values, (*reference)[i].values) << (*trained)[i].name;
    }
  }
  // --export-dtype BF16 writes the f32 weights rounded to bf16, and --init-from reads them
  // back: one step at a learning rate of 1e-30 exports exactly the rounded values.
  const std::string bf16 = dir_ + "/bf16.st";
  const testing::ProcessResult rounded =
      Run(2, {"--export", bf16, "--export-dtype", "BF16", "--override", "training { steps: 1 }"});
  ASSERT_EQ(rounded.exit_code, 0) << rounded.output;
  const testing::ProcessResult reloaded =
      Run(1, {"--init-from", bf16, "--export", dir_ + "/reloaded.st", "--override",
              "training { steps: 1 optimizer { sgd { lr: 1e-30 } } }"});
  ASSERT_EQ(reloaded.exit_code, 0) << reloaded.output;
  auto one_step = ReadSafetensors(dir_ + "/reloaded.st");
  auto bf16_values = ReadSafetensors(bf16);
  ASSERT_TRUE(one_step.ok() && bf16_values.ok());
  ASSERT_EQ(one_step->size(), bf16_values->size());
  for (size_t i = 0; i < one_step->size(); ++i) {
    EXPECT_EQ((*one_step)[i].values, (*bf16_values)[i].values) << (*one_step)[i].name;
    for (float v : (*bf16_values)[i].values) ASSERT_EQ(v, RoundToBf16(v));
  }
  // --export-shard-bytes splits the export as save_pretrained does; --init-from reads the index.
  std::filesystem::create_directories(dir_ + "/hf");
  const std::string sharded = dir_ + "/hf/model.safetensors";
  const testing::ProcessResult split = Run(2, {"--export", sharded, "--export-shard-bytes", "20000",
                                               "--override", "training { steps: 1 }"});
  ASSERT_EQ(split.exit_code, 0) << split.output;
  EXPECT_FALSE(std::filesystem::exists(sharded));
  absl::StatusOr<HfCheckpoint> shards = HfCheckpoint::Open(dir_ + "/hf");
  ASSERT_TRUE(shards.ok()) << shards.status();
  std::set<std::string> files;
  for (const HfCheckpoint::Tensor& t : shards->tensors()) files.insert(t.file);
  EXPECT_GE(files.size(), 3u);
  const testing::ProcessResult from_shards =
      Run(2, {"--init-from", sharded + ".index.json", "--export", dir_ + "/from_shards.st",
              "--override", "training { steps: 1 optimizer { sgd { lr: 1e-30 } } }"});
  ASSERT_EQ(from_shards.exit_code, 0) << from_shards.output;
  auto reread = ReadSafetensors(dir_ + "/from_shards.st");
  ASSERT_TRUE(reread.ok());
  ASSERT_EQ(reread->size(), shards->tensors().size());
  for (const NamedTensorData& t : *reread) {
    EXPECT_EQ(t.values, shards->Read(t.name)->values) << t.name;
  }
  // The same file read as UINT32 pairs two bytes' ids into one id past the vocabulary.
  const testing::ProcessResult wide =
      Run(1, {"--override", "data { tokens { path: \"corpus.u16\" dtype: UINT32 } }"});
  EXPECT_NE(wide.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(wide.output, "corpus.u16: the token at offset 0 (byte 0) is "))
      << wide.output;
  EXPECT_TRUE(absl::StrContains(wide.output, "outside the model's vocabulary [0, 256)"))
      << wide.output;
}

TEST_F(TokensJobTest, ThroughputFollowsTheStepTimeAndEachStagesModelFlops) {
  const std::vector<std::string> overrides = {"pipeline { stages: 2 }",
                                              "runtime { peak_tflops: 0.001 log_every: 1 }"};
  // Each stage's model FLOPs per step from the plan's analysis (forward + backward per sample,
  // times the 8 samples of a step), summed here by the parts' own stage numbers.
  absl::StatusOr<ResolvedPlan> resolved =
      ResolvePlan(PlanFile{plan_}, overrides, LayerRegistry::WithBuiltins());
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  std::vector<double> stage_flops(2, 0.0);
  for (const StageInfo& part : resolved->analyzed.stages) {
    stage_flops[part.stage] += part.flops_per_sample * 8;
  }
  ASSERT_GT(stage_flops[0], 0);
  ASSERT_GT(stage_flops[1], stage_flops[0]);  // the head's 256-way projection is on stage 1

  const std::string metrics = dir_ + "/metrics.jsonl";
  const testing::ProcessResult run = Run(2, {"--override", overrides[1], "--metrics-out", metrics});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, " tok/s | step ")) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "FLOP/s/rank (max ")) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, " on stage 1) | MFU ")) << run.output;
  std::ifstream in(metrics);
  int steps = 0;
  for (std::string line; std::getline(in, line);) {
    absl::StatusOr<Json> record = ParseJson(line, metrics);
    ASSERT_TRUE(record.ok()) << record.status();
    if (record->contains("eval")) continue;
    ++steps;
    const double seconds = record->at("step_ms").get<double>() / 1000.0;
    ASSERT_GT(seconds, 0);
    // 8 samples of 16 token ids.
    EXPECT_NEAR(record->at("tokens_per_s").get<double>(), 128 / seconds, 1e-9 * 128 / seconds);
    const std::vector<double> tflops = record->at("tflops_per_rank").get<std::vector<double>>();
    ASSERT_EQ(tflops.size(), 2u);
    for (int rank = 0; rank < 2; ++rank) {
      const double expected = stage_flops[rank] / seconds / 1e12;
      EXPECT_NEAR(tflops[rank], expected, 1e-9 * expected) << "rank " << rank;
    }
    const double mfu = (tflops[0] + tflops[1]) / 2 / 0.001;
    EXPECT_NEAR(record->at("mfu").get<double>(), mfu, 1e-9 * mfu);
  }
  EXPECT_EQ(steps, 3);
}

}  // namespace
}  // namespace gpipe

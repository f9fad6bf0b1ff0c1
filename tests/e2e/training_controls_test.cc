// The training controls through real jobs (tests/e2e/testdata/equivalence.pbtxt): the
// learning-rate schedule's values in the metrics, its exact continuation from a checkpoint, and
// skipped steps that do not advance it; gradient clipping bit-identical across stage counts and
// equal to an update computed here in double.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "runtime/ckpt/safetensors.h"
#include "runtime/data/npy.h"
#include "runtime/train/lr_schedule.h"
#include "tests/e2e/equivalence_harness.h"
#include "tests/support/process_runner.h"
#include "tests/support/scratch_dir.h"

namespace gpipe {
namespace {

using testing::ProcessResult;
using testing::Weights;

constexpr char kPlan[] = "tests/e2e/testdata/equivalence.pbtxt";
constexpr char kTinyLm[] = "tests/e2e/testdata/tiny_lm.pbtxt";
constexpr double kPeakLr = 0.1;  // the plan's sgd lr
constexpr char kCosine[] =
    "training { lr_schedule { warmup_steps: 2 decay: COSINE min_lr_ratio: 0.1 } }";

class TrainingControlsTest : public testing::EquivalenceHarness {
 protected:
  std::string Path(const std::string& name) const { return scratch_.path() + "/" + name; }

  // gpipe-worker on `stages` x `replicas` ranks with `args` (flags and --override's).
  ProcessResult Worker(int stages, const std::vector<std::string>& args, int replicas = 1,
                       const char* plan = kPlan) {
    std::vector<std::string> argv = testing::MpirunPrefix(stages * replicas);
    argv.insert(argv.end(), {testing::BinPath("gpipe-worker"), "--plan", testing::SourcePath(plan),
                             "--override", absl::StrCat("pipeline { stages: ", stages, " }")});
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::RunProcess(argv, 180);
  }

  static Weights Read(const std::string& path) { return ReadWeights(path); }

  // The value of `field` in every training record of a metrics file.
  static std::vector<double> Field(const std::string& path, const std::string& field) {
    std::ifstream in(path);
    std::vector<double> values;
    const std::string key = absl::StrCat("\"", field, "\":");
    for (std::string line; std::getline(in, line);) {
      const size_t at = line.find(key);
      if (at == std::string::npos || absl::StrContains(line, "\"eval\"")) continue;
      values.push_back(std::stod(line.substr(at + key.size())));
    }
    return values;
  }

  const testing::ScratchDir scratch_;  // this test's own, removed after it
};

TEST_F(TrainingControlsTest, ScheduledLrIsInTheMetricsAndResumesExactly) {
  const ProcessResult whole =
      Worker(2, {"--override", "training { steps: 6 }", "--override", kCosine, "--export",
                 Path("whole.st"), "--metrics-out", Path("whole.jsonl")});
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  pb::Training training;
  training.set_steps(6);
  training.mutable_lr_schedule()->set_warmup_steps(2);
  training.mutable_lr_schedule()->set_decay(pb::COSINE);
  training.mutable_lr_schedule()->set_min_lr_ratio(0.1);
  const LrSchedule schedule(training, kPeakLr);
  std::vector<double> expected;
  for (int u = 0; u < 6; ++u) expected.push_back(schedule.LrAt(u));
  EXPECT_EQ(Field(Path("whole.jsonl"), "lr"), expected);
  EXPECT_EQ(expected[0], kPeakLr / 2);
  EXPECT_EQ(expected[1], kPeakLr);

  // Three steps and a checkpoint, then the rest from it: the same rates and weights.
  const std::string checkpoint =
      absl::StrCat("checkpoint { dir: \"", Path("ckpt"), "\" every_steps: 3 }");
  const ProcessResult first =
      Worker(2, {"--override", "training { steps: 3 }", "--override", kCosine, "--override",
                 checkpoint, "--metrics-out", Path("parts.jsonl")});
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const ProcessResult rest =
      Worker(1, {"--override", "training { steps: 6 }", "--override", kCosine, "--override",
                 checkpoint, "--resume", "latest", "--export", Path("resumed.st"), "--metrics-out",
                 Path("parts.jsonl")});
  ASSERT_EQ(rest.exit_code, 0) << rest.output;
  EXPECT_EQ(Field(Path("parts.jsonl"), "lr"), expected);
  ExpectBitIdentical(Read(Path("resumed.st")), Read(Path("whole.st")));
}

TEST_F(TrainingControlsTest, SkippedStepsDoNotAdvanceTheSchedule) {
  // Weights whose every step is non-finite: fc1.weight all NaN.
  ASSERT_EQ(Worker(1, {"--override", "training { steps: 1 }", "--export", Path("w.st")}).exit_code,
            0);
  absl::StatusOr<std::vector<NamedTensorData>> weights = ReadSafetensors(Path("w.st"));
  ASSERT_TRUE(weights.ok());
  for (NamedTensorData& t : *weights) {
    if (t.name == "fc1.weight") std::fill(t.values.begin(), t.values.end(), NAN);
  }
  ASSERT_TRUE(WriteSafetensors(Path("nan.st"), *weights, {}).ok());
  const ProcessResult run =
      Worker(2, {"--init-from", Path("nan.st"), "--metrics-out", Path("m.jsonl"), "--override",
                 "training { steps: 3 max_skipped_steps: 0 lr_schedule { warmup_steps: 3 } }"});
  EXPECT_EQ(run.exit_code, 1) << run.output;  // no update applied
  EXPECT_EQ(Field(Path("m.jsonl"), "lr"),
            (std::vector<double>{kPeakLr / 3, kPeakLr / 3, kPeakLr / 3}));
}

// Clipping active on every step (the equivalence model's gradient norm is well above 0.05): the
// weights and every step's norm are bit-identical at 1, 2 and 4 stages, within 1e-5 with two
// replicas, and differ from the unclipped run's.
TEST_F(TrainingControlsTest, ClippedRunsAreBitIdenticalAcrossStageCounts) {
  const std::string clip = "training { clip_grad_norm: 0.05 }";
  std::vector<double> norms_at_one;
  for (int stages : {1, 2, 4}) {
    SCOPED_TRACE(absl::StrCat(stages, " stages"));
    const std::string k = absl::StrCat(stages);
    const ProcessResult run = Worker(stages, {"--override", clip, "--export", Path(k + ".st"),
                                              "--metrics-out", Path(k + ".jsonl")});
    ASSERT_EQ(run.exit_code, 0) << run.output;
    const std::vector<double> norms = Field(Path(k + ".jsonl"), "grad_norm");
    ASSERT_EQ(norms.size(), 4u);
    for (double norm : norms) EXPECT_GT(norm, 0.1);
    if (stages == 1) {
      norms_at_one = norms;
    } else {
      EXPECT_EQ(norms, norms_at_one);
      ExpectBitIdentical(Read(Path(k + ".st")), Read(Path("1.st")));
    }
  }
  const ProcessResult replicated =
      Worker(2,
             {"--override", clip, "--override", "pipeline { data_parallel: 2 micro_batches: 2 }",
              "--export", Path("2x2.st")},
             /*replicas=*/2);
  ASSERT_EQ(replicated.exit_code, 0) << replicated.output;
  ExpectClose(Read(Path("2x2.st")), Read(Path("1.st")), 1e-5);
  const ProcessResult unclipped = Worker(2, {"--export", Path("unclipped.st")});
  ASSERT_EQ(unclipped.exit_code, 0) << unclipped.output;
  EXPECT_TRUE(Differs(Read(Path("unclipped.st")), Read(Path("1.st"))));
}

// The tied language model (embedding on the first stage, output projection on the last):
// clipping keeps one stage and four bit-identical, norms included.
TEST_F(TrainingControlsTest, ClippedTiedLanguageModelIsBitIdenticalAcrossStageCounts) {
  const std::string clip = "training { clip_grad_norm: 0.1 }";
  for (int stages : {1, 4}) {
    const std::string k = absl::StrCat("lm", stages);
    const ProcessResult run = Worker(
        stages,
        {"--override", clip, "--export", Path(k + ".st"), "--metrics-out", Path(k + ".jsonl")},
        /*replicas=*/1, kTinyLm);
    ASSERT_EQ(run.exit_code, 0) << run.output;
  }
  const std::vector<double> norms = Field(Path("lm1.jsonl"), "grad_norm");
  ASSERT_EQ(norms.size(), 3u);
  for (double norm : norms) EXPECT_GT(norm, 0.1);
  EXPECT_EQ(Field(Path("lm4.jsonl"), "grad_norm"), norms);
  const Weights one = Read(Path("lm1.st"));
  ExpectBitIdentical(Read(Path("lm4.st")), one);
  EXPECT_EQ(one.at("embed.weight").values, one.at("head.weight").values);
}

// A two-layer linear model with MSE and tied weights whose one step is computed here in double:
// the exported weights and the reported norm match the clipped update
// W - lr * C / (norm + 1e-6) * g, with the tied weight's summed gradient counted once, at one stage
// and at two (each layer on its own stage, the tie across them).
TEST_F(TrainingControlsTest, ClippedUpdateMatchesOneComputedInDouble) {
  constexpr int kBatch = 8, kIn = 4, kHidden = 4, kOut = 4;
  constexpr double kLr = 0.5;
  std::filesystem::create_directories(Path("data"));
  std::vector<float> x(kBatch * kIn), t(kBatch * kOut);
  for (int i = 0; i < kBatch * kIn; ++i) x[i] = static_cast<float>(std::sin(1.0 + i));
  for (int i = 0; i < kBatch * kOut; ++i) t[i] = static_cast<float>(std::cos(0.5 * i));
  ASSERT_TRUE(WriteNpy(Path("data/x.npy"), Shape{kBatch, kIn}, x).ok());
  ASSERT_TRUE(WriteNpy(Path("data/t.npy"), Shape{kBatch, kOut}, t).ok());
  std::vector<float> w1(kHidden * kIn), b1(kHidden), w2(kOut * kHidden), b2(kOut);
  for (int i = 0; i < kHidden * kIn; ++i) w1[i] = 0.25f * static_cast<float>((i % 5) - 2);
  for (int i = 0; i < kHidden; ++i) b1[i] = 0.125f * static_cast<float>(i);
  w2 = w1;  // tied
  for (int i = 0; i < kOut; ++i) b2[i] = -0.25f * static_cast<float>(i);
  ASSERT_TRUE(WriteSafetensors(Path("init.st"),
                               {{"fc1.weight", {kHidden, kIn}, w1},
                                {"fc1.bias", {kHidden}, b1},
                                {"fc2.weight", {kOut, kHidden}, w2},
                                {"fc2.bias", {kOut}, b2}},
                               {})
                  .ok());

  // Forward and backward in double: loss = mean over kBatch * kOut elements of (y - t)^2.
  std::vector<double> gw1(kHidden * kIn), gb1(kHidden), gw2(kOut * kHidden), gb2(kOut);
  for (int b = 0; b < kBatch; ++b) {
    double h[kHidden], dy[kOut], dh[kHidden] = {};
    for (int j = 0; j < kHidden; ++j) {
      h[j] = b1[j];
      for (int i = 0; i < kIn; ++i) h[j] += double{w1[j * kIn + i]} * x[b * kIn + i];
    }
    for (int o = 0; o < kOut; ++o) {
      double y = b2[o];
      for (int j = 0; j < kHidden; ++j) y += double{w2[o * kHidden + j]} * h[j];
      dy[o] = 2.0 * (y - t[b * kOut + o]) / (kBatch * kOut);
      gb2[o] += dy[o];
      for (int j = 0; j < kHidden; ++j) {
        gw2[o * kHidden + j] += dy[o] * h[j];
        dh[j] += double{w2[o * kHidden + j]} * dy[o];
      }
    }
    for (int j = 0; j < kHidden; ++j) {
      gb1[j] += dh[j];
      for (int i = 0; i < kIn; ++i) gw1[j * kIn + i] += dh[j] * x[b * kIn + i];
    }
  }
  // The tie's gradient is the sum of its members' and counts once.
  std::vector<double> tied(gw1.size());
  for (size_t i = 0; i < tied.size(); ++i) tied[i] = gw1[i] + gw2[i];
  double sum = 0;
  for (const std::vector<double>* g : {&tied, &gb1, &gb2}) {
    for (double v : *g) sum += v * v;
  }
  const double norm = std::sqrt(sum);
  const double clip = norm / 4;  // clipping scales by about 1/4
  const double scale = clip / (norm + 1e-6);

  std::ofstream(Path("plan.pbtxt"))
      << absl::StrCat(R"pb(
                        model {
                          input { shape: [ 4 ] }
                          layers {
                            name: "fc1"
                            linear { out_features: 4 }
                          }
                          layers {
                            name: "fc2"
                            linear { out_features: 4 }
                          }
                          loss { mse {} }
                          ties { parameters: [ "fc1.weight", "fc2.weight" ] }
                        }
                        pipeline { stages: 1 micro_batches: 2 }
                        training { global_batch: 8 steps: 1
                                   optimizer { sgd { lr: 0.5 } }
                                   clip_grad_norm:)pb",
                      absl::StrFormat("%.17g", clip), R"pb(}
                                                           data { npy { inputs: "data/x.npy" targets: "data/t.npy" } shuffle: false }
    runtime { log_every: 1 }
  )pb");
  for (int stages : {1, 2}) {
    SCOPED_TRACE(absl::StrCat(stages, " stages"));
    const std::string k = absl::StrCat(stages);
    std::vector<std::string> argv = testing::MpirunPrefix(stages);
    argv.insert(argv.end(),
                {testing::BinPath("gpipe-worker"), "--plan", Path("plan.pbtxt"), "--override",
                 absl::StrCat("pipeline { stages: ", stages, " }"), "--init-from", Path("init.st"),
                 "--export", Path(k + ".st"), "--metrics-out", Path(k + ".jsonl")});
    const ProcessResult run = testing::RunProcess(argv, 120);
    ASSERT_EQ(run.exit_code, 0) << run.output;
    EXPECT_TRUE(absl::StrContains(run.output, "| grad norm ")) << run.output;
    const std::vector<double> reported = Field(Path(k + ".jsonl"), "grad_norm");
    ASSERT_EQ(reported.size(), 1u);
    EXPECT_NEAR(reported[0], norm, 1e-5 * norm);
    const Weights trained = Read(Path(k + ".st"));
    const auto expect_updated = [&](const std::string& name, const std::vector<float>& before,
                                    const std::vector<double>& grad) {
      ASSERT_TRUE(trained.contains(name)) << name;
      const std::vector<float>& after = trained.at(name).values;
      ASSERT_EQ(after.size(), before.size());
      for (size_t i = 0; i < before.size(); ++i) {
        const double expected = before[i] - kLr * scale * grad[i];
        EXPECT_NEAR(after[i], expected, 1e-6 * (1 + std::abs(expected))) << name << "[" << i << "]";
      }
    };
    expect_updated("fc1.weight", w1, tied);
    expect_updated("fc1.bias", b1, gb1);
    expect_updated("fc2.weight", w2, tied);
    expect_updated("fc2.bias", b2, gb2);
  }
}

}  // namespace
}  // namespace gpipe

// The README's main example trains: the loss falls, and the metrics file carries every field.
// The embedding example (examples/embed) takes its arguments as values, never as plan text.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/support/process_runner.h"
#include "tests/support/scratch_dir.h"

namespace gpipe {
namespace {

// The number after `"key":` in a one-line JSON object.
double NumberField(const std::string& line, const std::string& key) {
  const std::string needle = absl::StrCat("\"", key, "\":");
  const size_t at = line.find(needle);
  if (at == std::string::npos) return NAN;
  size_t begin = at + needle.size();
  while (begin < line.size() && line[begin] == ' ') ++begin;
  size_t end = begin;
  while (end < line.size() && line[end] != ',' && line[end] != '}') ++end;
  double value = NAN;
  if (!absl::SimpleAtod(line.substr(begin, end - begin), &value)) return NAN;
  return value;
}

TEST(ExampleTest, MainExampleLearns) {
  const std::string metrics =
      absl::StrCat(::gpipe::testing::ProcessScratchDir(), "/mlp_metrics.jsonl");
  const testing::ProcessResult run = testing::RunProcess(
      {testing::BinPath("gpipe-run"), testing::SourcePath("examples/mlp/plan.pbtxt"), "--override",
       "training { steps: 60 }", "--metrics-out", metrics},
      240);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "step 60/60")) << run.output;

  std::ifstream in(metrics);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 60u);
  for (const char* key :
       {"\"step\"", "\"loss\"", "\"samples_per_s\"", "\"step_ms\"", "\"peak_bytes\"",
        "\"peak_boundary_bytes\"", "\"peak_activation_bytes\"", "\"peak_boundary_grad_bytes\"",
        "\"busy_ms\"", "\"bubble\"", "\"accuracy\""}) {
    EXPECT_TRUE(absl::StrContains(lines.front(), key)) << key << " in " << lines.front();
  }
  // Per-stage lists have one entry per stage.
  const size_t list = lines.front().find("\"peak_bytes\":");
  const std::string peak = lines.front().substr(list, lines.front().find(']', list) - list);
  EXPECT_EQ(std::count(peak.begin(), peak.end(), ','), 3) << peak;

  auto mean_loss = [&](size_t begin, size_t end) {
    double sum = 0;
    for (size_t i = begin; i < end; ++i) sum += NumberField(lines[i], "loss");
    return sum / (end - begin);
  };
  const double first = mean_loss(0, 5);
  const double last = mean_loss(55, 60);
  EXPECT_GT(first, 1.5);  // ~ln(10) at the start
  EXPECT_LT(last, 0.6 * first) << "first " << first << " last " << last;
}

TEST(ExampleTest, PlanToolShowsTheSchedule) {
  const std::string plan = testing::SourcePath("examples/mlp/plan.pbtxt");
  const testing::ProcessResult check =
      testing::RunProcess({testing::BinPath("gpipe-plan"), "check", plan}, 30);
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_TRUE(absl::StrContains(check.output, "is valid")) << check.output;
  EXPECT_TRUE(absl::StrContains(check.output, "head")) << check.output;
  const testing::ProcessResult show =
      testing::RunProcess({testing::BinPath("gpipe-plan"), "show", plan}, 30);
  EXPECT_EQ(show.exit_code, 0) << show.output;
  EXPECT_TRUE(absl::StrContains(show.output, "(K-1)/(M+K-1) = 27.3%")) << show.output;
  EXPECT_TRUE(absl::StrContains(show.output, "predicted peak memory per stage")) << show.output;
  const testing::ProcessResult compare =
      testing::RunProcess({testing::BinPath("gpipe-plan"), "show", plan, "--compare"}, 30);
  EXPECT_EQ(compare.exit_code, 0) << compare.output;
  for (const char* row : {"\nGPIPE ", "\nONE_F_ONE_B ", "\nINTERLEAVED_1F1B v=2 ",
                          "\nZERO_BUBBLE_H1 ", "\nZERO_BUBBLE_H2 "}) {
    EXPECT_TRUE(absl::StrContains(compare.output, row)) << row << " in " << compare.output;
  }
  const testing::ProcessResult bad =
      testing::RunProcess({testing::BinPath("gpipe-plan"), "check",
                           testing::SourcePath("tests/e2e/testdata/syntax_error.pbtxt")},
                          30);
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_TRUE(absl::StrContains(bad.output, "syntax_error.pbtxt:5:")) << bad.output;
}

// The real-data examples (their data comes from scripts/setup.sh): a short run learns, and the
// evaluation of the held-out split reaches the progress output and the metrics file.
TEST(ExampleTest, FashionMnistConvnetLearnsAndEvaluates) {
  const std::string metrics =
      absl::StrCat(::gpipe::testing::ProcessScratchDir(), "/fashion_metrics.jsonl");
  const testing::ProcessResult run = testing::RunProcess(
      {testing::BinPath("gpipe-run"), testing::SourcePath("examples/fashion_mnist/plan.pbtxt"),
       "--override", "training { steps: 60 eval_every: 60 eval_samples: 1000 }", "--metrics-out",
       metrics},
      300);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "eval after step 60 | loss")) << run.output;
  std::ifstream in(metrics);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 61u);  // 60 steps and one evaluation
  EXPECT_TRUE(absl::StrContains(lines.back(), "\"eval\":true")) << lines.back();
  EXPECT_EQ(NumberField(lines.back(), "samples"), 1000);
  // Ten classes start at 10%; 60 steps of 64 images already sort most of them.
  EXPECT_GT(NumberField(lines.back(), "accuracy"), 0.6) << lines.back();
}

// The U-Net-style example's skip connections cross 1, 2 and 3 of its 4 stages: a short run
// learns and evaluates.
TEST(ExampleTest, UnetWithSkipsAcrossStagesLearnsAndEvaluates) {
  const std::string metrics =
      absl::StrCat(::gpipe::testing::ProcessScratchDir(), "/unet_metrics.jsonl");
  const testing::ProcessResult run = testing::RunProcess(
      {testing::BinPath("gpipe-run"), testing::SourcePath("examples/unet/plan.pbtxt"), "--override",
       "training { steps: 40 eval_every: 40 eval_samples: 500 }", "--metrics-out", metrics},
      300);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "eval after step 40 | loss")) << run.output;
  std::ifstream in(metrics);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 41u);  // 40 steps and one evaluation
  EXPECT_EQ(NumberField(lines.back(), "samples"), 500);
  EXPECT_GT(NumberField(lines.back(), "accuracy"), 0.5) << lines.back();
}

TEST(ExampleTest, CharTransformerLearnsAndReportsBitsPerByte) {
  const std::string metrics =
      absl::StrCat(::gpipe::testing::ProcessScratchDir(), "/char_metrics.jsonl");
  const testing::ProcessResult run = testing::RunProcess(
      {testing::BinPath("gpipe-run"), testing::SourcePath("examples/char_transformer/plan.pbtxt"),
       "--override", "training { steps: 30 eval_every: 30 eval_samples: 64 }", "--metrics-out",
       metrics},
      300);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::ifstream in(metrics);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 31u);
  const double bits = NumberField(lines.back(), "bits_per_byte");
  // Uniform over 256 byte values is 8 bits; 30 steps learn the byte frequencies at least.
  EXPECT_LT(bits, 5.5) << lines.back();
  EXPECT_GT(bits, 0.5) << lines.back();
  EXPECT_LT(NumberField(lines[29], "loss"), NumberField(lines[0], "loss"));
}

// An argument that carried plan text used to be merged into the plan as an override.
TEST(ExampleTest, EmbedExampleRefusesArgumentsThatAreNotValues) {
  const std::string program = testing::BinPath("gpipe-embed-example");
  if (!std::filesystem::exists(program)) GTEST_SKIP() << "built without GPIPE_BUILD_EXAMPLES";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--steps", "1 } data { synthetic { num_samples: 8 } }"},
       "--steps needs a whole number >= 1, got '1 } data { synthetic { num_samples: 8 } }'"},
      {{"--steps", "0"}, "--steps needs a whole number >= 1, got '0'"},
      {{"--device", "CPU } training { steps: 1 }"},
       "--device needs CPU or CUDA, got 'CPU } training { steps: 1 }'"},
      {{"--device", "SIM"}, "--device needs CPU or CUDA, got 'SIM'"},
      {{"--steps"}, "--steps needs a value"},
      {{"--learning-rate", "1"}, "unknown argument '--learning-rate'"}};
  for (const auto& [args, expected] : cases) {
    SCOPED_TRACE(absl::StrJoin(args, " "));
    std::vector<std::string> argv = testing::MpirunPrefix(1);
    argv.push_back(program);
    argv.insert(argv.end(), args.begin(), args.end());
    const testing::ProcessResult run = testing::RunProcess(argv, 60);
    EXPECT_EQ(run.exit_code, 2) << run.output;
    EXPECT_TRUE(absl::StrContains(run.output, absl::StrCat("gpipe-embed-example: ", expected)))
        << run.output;
    EXPECT_FALSE(absl::StrContains(run.output, "step 20")) << run.output;
  }
}

TEST(ExampleTest, EmbedExampleTakesStepsAndDeviceAsValues) {
  const std::string program = testing::BinPath("gpipe-embed-example");
  if (!std::filesystem::exists(program)) GTEST_SKIP() << "built without GPIPE_BUILD_EXAMPLES";
  std::vector<std::string> argv = testing::MpirunPrefix(2);
  argv.insert(argv.end(), {program, "--steps", "40", "--device", "CPU"});
  const testing::ProcessResult run = testing::RunProcess(argv, 120);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "trained 40 steps on 2 ranks")) << run.output;
}

}  // namespace
}  // namespace gpipe

// The training controls through real jobs (tests/e2e/testdata/equivalence.pbtxt): the
// learning-rate schedule's values in the metrics, its exact continuation from a checkpoint, and
// skipped steps that do not advance it.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/ckpt/safetensors.h"
#include "runtime/train/lr_schedule.h"
#include "tests/e2e/equivalence_harness.h"
#include "tests/support/process_runner.h"
#include "tests/support/scratch_dir.h"

namespace gpipe {
namespace {

using testing::ProcessResult;
using testing::Weights;

constexpr char kPlan[] = "tests/e2e/testdata/equivalence.pbtxt";
constexpr double kPeakLr = 0.1;  // the plan's sgd lr
constexpr char kCosine[] =
    "training { lr_schedule { warmup_steps: 2 decay: COSINE min_lr_ratio: 0.1 } }";

class TrainingControlsTest : public testing::EquivalenceHarness {
 protected:
  std::string Path(const std::string& name) const { return scratch_.path() + "/" + name; }

  // gpipe-worker on `stages` ranks with `args` (flags and --override's).
  ProcessResult Worker(int stages, const std::vector<std::string>& args) {
    std::vector<std::string> argv = testing::MpirunPrefix(stages);
    argv.insert(argv.end(), {testing::BinPath("gpipe-worker"), "--plan", testing::SourcePath(kPlan),
                             "--override", absl::StrCat("pipeline { stages: ", stages, " }")});
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::RunProcess(argv, 180);
  }

  static Weights Read(const std::string& path) {
    Weights weights;
    absl::StatusOr<std::vector<NamedTensorData>> read = ReadSafetensors(path);
    EXPECT_TRUE(read.ok()) << read.status();
    if (read.ok()) {
      for (NamedTensorData& t : *read) weights[t.name] = std::move(t);
    }
    return weights;
  }

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

}  // namespace
}  // namespace gpipe

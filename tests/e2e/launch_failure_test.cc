// A bad plan or a wrong process count fails every rank, quickly, with rank 0's message and its
// location; gpipe-run catches the process count before launching anything.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/support/process_runner.h"

namespace gpipe {
namespace {

testing::ProcessResult RunWorkers(int np, const std::string& plan,
                                  const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv = testing::MpirunPrefix(np);
  argv.insert(argv.end(), {testing::BinPath("gpipe-worker"), "--plan", plan});
  argv.insert(argv.end(), extra.begin(), extra.end());
  return testing::RunProcess(argv, 60);
}

void ExpectEveryRankFailed(const testing::ProcessResult& run, int np) {
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_FALSE(run.timed_out) << run.output;
  EXPECT_LT(run.seconds, 30.0) << run.output;
  for (int r = 0; r < np; ++r) {
    EXPECT_TRUE(absl::StrContains(run.output, absl::StrCat("[gpipe r", r, "] error:")))
        << "rank " << r << " printed no error:\n"
        << run.output;
  }
}

TEST(LaunchFailureTest, SyntaxErrorFailsEveryRankWithFileLineColumn) {
  const std::string plan = testing::SourcePath("tests/e2e/testdata/syntax_error.pbtxt");
  const testing::ProcessResult run = RunWorkers(3, plan);
  ExpectEveryRankFailed(run, 3);
  EXPECT_TRUE(absl::StrContains(run.output, "syntax_error.pbtxt:5:")) << run.output;
}

TEST(LaunchFailureTest, SemanticErrorNamesTheFieldAndLocation) {
  const std::string plan = testing::SourcePath("tests/e2e/testdata/indivisible_batch.pbtxt");
  const testing::ProcessResult run = RunWorkers(2, plan);
  ExpectEveryRankFailed(run, 2);
  EXPECT_TRUE(absl::StrContains(run.output, "indivisible_batch.pbtxt:8:")) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "not divisible by micro_batches 3")) << run.output;
}

TEST(LaunchFailureTest, WorkerRejectsWrongWorldSize) {
  const std::string plan = testing::SourcePath("tests/e2e/testdata/four_stages.pbtxt");
  const testing::ProcessResult run = RunWorkers(2, plan);
  ExpectEveryRankFailed(run, 2);
  EXPECT_TRUE(absl::StrContains(run.output, "needs 4 processes")) << run.output;
}

TEST(LaunchFailureTest, MissingPlanFileFailsEveryRank) {
  const testing::ProcessResult run = RunWorkers(2, "/nonexistent/plan.pbtxt");
  ExpectEveryRankFailed(run, 2);
  EXPECT_TRUE(absl::StrContains(run.output, "/nonexistent/plan.pbtxt")) << run.output;
}

TEST(LaunchFailureTest, BadOverrideIsReportedWithItsIndex) {
  const std::string plan = testing::SourcePath("tests/e2e/testdata/four_stages.pbtxt");
  const testing::ProcessResult run = RunWorkers(
      4, plan,
      {"--override", "pipeline { micro_batches: 2 }", "--override", "pipeline { stagez: 4 }"});
  ExpectEveryRankFailed(run, 4);
  EXPECT_TRUE(absl::StrContains(run.output, "--override[2]:1:")) << run.output;
}

TEST(LaunchFailureTest, GpipeRunRejectsWrongProcessCountBeforeLaunching) {
  const std::string plan = testing::SourcePath("tests/e2e/testdata/four_stages.pbtxt");
  const testing::ProcessResult run =
      testing::RunProcess({testing::BinPath("gpipe-run"), "-n", "2", plan}, 30);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "needs 4 processes")) << run.output;
  EXPECT_FALSE(absl::StrContains(run.output, "[gpipe r")) << "workers were launched:\n"
                                                          << run.output;
}

TEST(LaunchFailureTest, GpipeRunDryRunPrintsTheLaunchCommand) {
  const std::string plan = testing::SourcePath("tests/e2e/testdata/four_stages.pbtxt");
  const testing::ProcessResult run = testing::RunProcess(
      {testing::BinPath("gpipe-run"), "--dry-run", plan, "--override", "training { steps: 1 }"},
      30);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "mpirun --stdin none -np 4")) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "gpipe-worker --plan")) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "--override training { steps: 1 }")) << run.output;
  // The plan's start-up limit reaches the ranks that never read the plan.
  EXPECT_TRUE(absl::StrContains(run.output, "--startup-timeout 120")) << run.output;
}

TEST(LaunchFailureTest, GpipeRunPropagatesTheJobExitCode) {
  const std::string plan = testing::SourcePath("tests/e2e/testdata/four_stages.pbtxt");
  const testing::ProcessResult ok = testing::RunProcess({testing::BinPath("gpipe-run"), plan}, 90);
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_TRUE(absl::StrContains(ok.output, "step 2/2")) << ok.output;
  // A job that fails after launch (rank 0 rejects the missing --init-from file).
  const testing::ProcessResult failed = testing::RunProcess(
      {testing::BinPath("gpipe-run"), plan, "--init-from", "/nonexistent.safetensors"}, 90);
  EXPECT_EQ(failed.exit_code, 1) << failed.output;
  EXPECT_TRUE(absl::StrContains(failed.output, "/nonexistent.safetensors: no such file"))
      << failed.output;
  // gpipe's lines, not Open MPI's "Primary job terminated normally ... aborted" banner.
  EXPECT_FALSE(absl::StrContains(failed.output, "Primary job")) << failed.output;
  EXPECT_FALSE(absl::StrContains(failed.output, "-------------")) << failed.output;
}

TEST(LaunchFailureTest, GpipeRunShowsTheLaunchersBannerOnlyWhenVerbose) {
  const std::string plan = testing::SourcePath("tests/e2e/testdata/four_stages.pbtxt");
  const testing::ProcessResult verbose =
      testing::RunProcess({testing::BinPath("gpipe-run"), "--verbose", plan, "--init-from",
                           "/nonexistent.safetensors"},
                          90);
  EXPECT_EQ(verbose.exit_code, 1) << verbose.output;
  EXPECT_TRUE(absl::StrContains(verbose.output, "/nonexistent.safetensors: no such file"))
      << verbose.output;
  EXPECT_TRUE(absl::StrContains(verbose.output, "Primary job")) << verbose.output;
}

TEST(LaunchFailureTest, MidStepFailureStopsEveryRankWithTheFailingRanksContext) {
  // The last stage runs out of its memory budget in the middle of step 0; the other two ranks
  // are blocked waiting for its gradients and must stop with its message, not at a deadline.
  const std::string plan = testing::SourcePath("tests/e2e/testdata/out_of_memory.pbtxt");
  std::vector<std::string> argv = testing::MpirunPrefix(3);
  argv.insert(argv.end(), {testing::BinPath("gpipe-worker"), "--plan", plan});
  const testing::ProcessResult run = testing::RunProcess(argv, 60);
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_FALSE(run.timed_out) << run.output;
  EXPECT_LT(run.seconds, 20.0) << run.output;  // the plan's wait deadline is 30 s
  EXPECT_TRUE(absl::StrContains(
      run.output, "[gpipe r2] error: rank 2, stage 2, step 0: instruction Forward(mb="))
      << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "exceeds the limit of 800000 bytes")) << run.output;
  // Rank 0 forwards every micro-batch without waiting, so it is always in its first wait,
  // RecvGrad(mb=7); where rank 1 waits depends on timing, but it names its instruction too.
  EXPECT_TRUE(absl::StrContains(
      run.output, "[gpipe r0] error: stopping: rank 0, stage 0, step 0: instruction "
                  "RecvGrad(mb=7): rank 2 aborted the job: rank 2, stage 2, step 0"))
      << run.output;
  bool rank1_named_its_instruction = false;
  for (absl::string_view line : absl::StrSplit(run.output, '\n')) {
    if (absl::StartsWith(line, "[gpipe r1] error: stopping: rank 1, stage 1, step 0: "
                               "instruction ") &&
        absl::StrContains(line, "): rank 2 aborted the job: rank 2, stage 2, step 0")) {
      rank1_named_its_instruction = true;
    }
  }
  EXPECT_TRUE(rank1_named_its_instruction) << run.output;
}

}  // namespace
}  // namespace gpipe

// `device: CUDA` where it cannot run fails every rank at start-up, quickly, with one line saying
// why: no GPU visible to the rank (a build with the CUDA backend on a machine without a GPU),
// or a build without the CUDA backend. Never a crash or a hang.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/e2e/gpu_presence.h"
#include "tests/support/process_runner.h"

namespace gpipe {
namespace {

// The line rank `rank` printed its error on ("" when none).
std::string ErrorLineOf(const std::string& output, int rank) {
  const std::string prefix = absl::StrCat("[gpipe r", rank, "] error:");
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (absl::StartsWith(line, prefix)) return std::string(line);
  }
  return "";
}

TEST(CudaLaunchTest, DeviceCudaWithoutAGpuFailsEveryRankAtStartUpWithOneLine) {
  if (testing::VisibleGpus() > 0) {
    GTEST_SKIP() << "a GPU is visible here; e2e_cuda_equivalence_test trains on it";
  }
  constexpr int kRanks = 2;
  std::vector<std::string> argv = testing::MpirunPrefix(kRanks);
  argv.insert(argv.end(), {testing::BinPath("gpipe-worker"), "--plan",
                           testing::SourcePath("tests/e2e/testdata/equivalence.pbtxt"),
                           "--override", absl::StrCat("pipeline { stages: ", kRanks, " }"),
                           "--override", "runtime { device: CUDA }"});
  const testing::ProcessResult run = testing::RunProcess(argv, 60);
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_LT(run.exit_code, 128) << "killed by a signal:\n" << run.output;
  EXPECT_FALSE(run.timed_out) << run.output;
  EXPECT_LT(run.seconds, 30.0) << run.output;
  for (int r = 0; r < kRanks; ++r) {
    const std::string line = ErrorLineOf(run.output, r);
    ASSERT_FALSE(line.empty()) << "rank " << r << " printed no error:\n" << run.output;
    if (testing::CudaBackendBuilt()) {
      EXPECT_TRUE(absl::StrContains(
          line, absl::StrCat("device: CUDA but no GPU is visible to rank ", r, " on host ")))
          << line;
      EXPECT_TRUE(absl::StrContains(line, "CUDA_VISIBLE_DEVICES")) << line;
    } else {
      EXPECT_TRUE(absl::StrContains(
          line,
          "runtime.device CUDA is not built into this program: this gpipe was built "
          "without the CUDA backend (no nvcc at build time)"))
          << line;
    }
  }
  EXPECT_FALSE(absl::StrContains(run.output, "Segmentation fault")) << run.output;
  EXPECT_FALSE(absl::StrContains(run.output, "Aborted")) << run.output;
}

}  // namespace
}  // namespace gpipe

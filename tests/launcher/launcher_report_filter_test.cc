#include "launcher/launcher_report_filter.h"

#include <string>

#include "gtest/gtest.h"

namespace gpipe {
namespace {

constexpr char kDashes[] =
    "--------------------------------------------------------------------------\n";

// Open MPI 4.1's stderr when rank 1 exits with 1 after printing its error (as mpirun wrote it).
std::string FailedJob() {
  return std::string("[gpipe r0] error: stopping: rank 1 aborted the job\n") + kDashes +
         "Primary job  terminated normally, but 1 process returned\n"
         "a non-zero exit code. Per user-direction, the job has been aborted.\n" +
         kDashes + "[gpipe r1] error: rank 1, stage 1, step 0: out of memory\n";
}

TEST(LauncherReportFilterTest, DropsTheFailedJobBannerAndKeepsTheRanksLines) {
  LauncherReportFilter filter;
  const std::string out = filter.Feed(FailedJob()) + filter.Finish();
  EXPECT_EQ(out,
            "[gpipe r0] error: stopping: rank 1 aborted the job\n"
            "[gpipe r1] error: rank 1, stage 1, step 0: out of memory\n");
}

TEST(LauncherReportFilterTest, TheSameOutputInPiecesOfAnySizeGivesTheSameText) {
  const std::string whole = FailedJob();
  for (size_t piece : {1u, 2u, 7u, 64u}) {
    LauncherReportFilter filter;
    std::string out;
    for (size_t i = 0; i < whole.size(); i += piece) out += filter.Feed(whole.substr(i, piece));
    out += filter.Finish();
    EXPECT_EQ(out,
              "[gpipe r0] error: stopping: rank 1 aborted the job\n"
              "[gpipe r1] error: rank 1, stage 1, step 0: out of memory\n")
        << "pieces of " << piece;
  }
}

TEST(LauncherReportFilterTest, ARankKilledByASignalBecomesOneLineNamingIt) {
  LauncherReportFilter filter;
  const std::string out =
      filter.Feed(std::string(kDashes) +
                  "Primary job  terminated normally, but 1 process returned\n"
                  "a non-zero exit code. Per user-direction, the job has been aborted.\n" +
                  kDashes + kDashes +
                  "mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 "
                  "(Killed).\n" +
                  kDashes) +
      filter.Finish();
  EXPECT_EQ(out,
            "gpipe-run: mpirun noticed that process rank 1 with PID 0 on node vm exited on "
            "signal 9 (Killed).\n");
}

TEST(LauncherReportFilterTest, TheOtherWordingOfTheBannerIsDroppedToo) {
  LauncherReportFilter filter;
  const std::string out =
      filter.Feed(std::string(kDashes) +
                  "mpirun detected that one or more processes exited with non-zero status, thus "
                  "causing\nthe job to be terminated. The first process to do so was:\n\n"
                  "  Process name: [[1234,1],1]\n  Exit code:    1\n" +
                  kDashes) +
      filter.Finish();
  EXPECT_EQ(out, "");
}

TEST(LauncherReportFilterTest, OtherReportsPassWholeAndRankLinesInsideAFrameAtOnce) {
  const std::string slots = std::string(kDashes) +
                            "There are not enough slots available in the system to satisfy the 8\n"
                            "slots that were requested by the application:\n" +
                            kDashes;
  LauncherReportFilter filter;
  EXPECT_EQ(filter.Feed(slots), slots);
  // A rank's line that lands inside a frame is not held back until the frame closes.
  EXPECT_EQ(filter.Feed(std::string(kDashes) + "Primary job  terminated normally, but\n" +
                        "[gpipe r2] error: late\n"),
            "[gpipe r2] error: late\n");
  EXPECT_EQ(filter.Feed("the job has been aborted.\n" + std::string(kDashes)), "");
}

TEST(LauncherReportFilterTest, AnUnclosedFrameAndAPartialLineComeOutAtTheEnd) {
  LauncherReportFilter filter;
  EXPECT_EQ(filter.Feed(std::string(kDashes) + "mpirun was cut off"), "");
  EXPECT_EQ(filter.Finish(), std::string(kDashes) + "mpirun was cut off");
  EXPECT_EQ(filter.Feed("plain line\n"), "plain line\n");
}

}  // namespace
}  // namespace gpipe

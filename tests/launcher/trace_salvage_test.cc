// gpipe-run's trace salvage: which parts are a failed job's, what is merged, what is removed.
#include "launcher/trace_salvage.h"

#include <chrono>
#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "runtime/trace/trace_parts.h"
#include "tests/support/scratch_dir.h"

namespace gpipe {
namespace {

namespace fs = std::filesystem;

class TraceSalvageTest : public ::testing::Test {
 protected:
  TraceSalvageTest() : trace_(scratch_.path() + "/trace.json") { info_.ranks = 2; }

  // Rank `rank`'s progress part, modified at `when`.
  void WriteProgress(int rank, fs::file_time_type when) const {
    pb::RankTrace events;
    events.set_rank(rank);
    pb::TraceEventProto* event = events.add_events();
    event->set_begin_ns(1000);
    event->set_end_ns(2000);
    event->set_step(1);
    const std::string path = TraceProgressPath(trace_, rank);
    ASSERT_TRUE(AppendTraceProgress(path, events).ok());
    fs::last_write_time(path, when);
  }

  const testing::ScratchDir scratch_;
  const std::string trace_;
  TraceRunInfo info_;
  const fs::file_time_type launched_ = fs::file_time_type::clock::now();
  const fs::file_time_type before_ = launched_ - std::chrono::hours(1);
  const fs::file_time_type after_ = launched_ + std::chrono::seconds(1);
};

TEST_F(TraceSalvageTest, AFailedJobsPartsAreMergedAndRemoved) {
  WriteProgress(0, after_);
  WriteProgress(1, after_);
  const std::string line = SalvageTrace(trace_, info_, 1, launched_);
  EXPECT_NE(line.find("from what ranks 0, 1 of 2"), std::string::npos) << line;
  EXPECT_TRUE(fs::exists(trace_));
  EXPECT_FALSE(fs::exists(TraceProgressPath(trace_, 0)));
  EXPECT_FALSE(fs::exists(TraceProgressPath(trace_, 1)));
}

TEST_F(TraceSalvageTest, AFinishedJobIsLeftAlone) {
  WriteProgress(0, after_);
  EXPECT_EQ(SalvageTrace(trace_, info_, 0, launched_), "");
  EXPECT_FALSE(fs::exists(trace_));
  EXPECT_TRUE(fs::exists(TraceProgressPath(trace_, 0)));
}

// A job that failed before the plan was distributed has no trace: an earlier run's parts are
// not merged as this job's (nor removed: they are not this job's).
TEST_F(TraceSalvageTest, PartsOlderThanTheLaunchAreNotThisJobs) {
  WriteProgress(0, before_);
  WriteProgress(1, before_);
  EXPECT_EQ(SalvageTrace(trace_, info_, 1, launched_), "");
  EXPECT_FALSE(fs::exists(trace_));
  EXPECT_TRUE(fs::exists(TraceProgressPath(trace_, 0)));
}

TEST_F(TraceSalvageTest, OnlyThisJobsRanksAreMerged) {
  WriteProgress(0, after_);
  WriteProgress(1, before_);
  const std::string line = SalvageTrace(trace_, info_, 1, launched_);
  EXPECT_NE(line.find("from what ranks 0 of 2"), std::string::npos) << line;
  EXPECT_FALSE(fs::exists(TraceProgressPath(trace_, 0)));
  EXPECT_TRUE(fs::exists(TraceProgressPath(trace_, 1)));
}

// Rank 0 wrote the trace and was killed before removing the parts: they go, the trace stays.
TEST_F(TraceSalvageTest, PartsLeftBesideRankZerosTraceAreRemoved) {
  WriteProgress(0, after_);
  WriteProgress(1, after_);
  ASSERT_TRUE(WriteChromeTrace(trace_, info_, {}).ok());
  fs::last_write_time(trace_, after_);
  EXPECT_EQ(SalvageTrace(trace_, info_, 137, launched_), "");
  EXPECT_TRUE(fs::exists(trace_));
  EXPECT_FALSE(fs::exists(TraceProgressPath(trace_, 0)));
  EXPECT_FALSE(fs::exists(TraceProgressPath(trace_, 1)));
}

}  // namespace
}  // namespace gpipe

// What a commit removes: incomplete checkpoints and stray temporaries left by a crash, the
// checkpoints beyond keep_last, and an earlier run's checkpoints when this run started over.
#include "runtime/ckpt/checkpoint_retention.h"

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/ckpt/checkpoint_layout.h"
#include "runtime/ckpt/checkpoint_writer.h"
#include "tests/ckpt/checkpoint_fixture.h"

namespace gpipe {
namespace {

namespace fs = std::filesystem;
using ::gpipe::testing::FreshTempDir;
using ::gpipe::testing::StepsIn;
using ::gpipe::testing::WriteText;
using ::gpipe::testing::WriteTwoStageCheckpoint;
using Steps = std::vector<int64_t>;

// A file last modified `age` ago (negative: in the future).
void WriteAged(const std::string& path, std::chrono::seconds age) {
  WriteText(path, "partial");
  fs::last_write_time(path, fs::file_time_type::clock::now() - age);
}

TEST(CheckpointRetentionTest, IncompleteCheckpointsAndStrayTemporariesGoWithTheNextCommit) {
  const std::string dir = FreshTempDir();
  WriteTwoStageCheckpoint(dir, 4);
  // A crash's leftovers: incomplete step directories older and newer than the next commit,
  // `latest`'s temporary, and a shard's temporary inside a kept checkpoint.
  fs::create_directories(dir + "/step-000000003");
  fs::create_directories(dir + "/step-000000009");
  WriteText(dir + "/step-000000009/stage-000-of-002.safetensors", "partial");
  WriteAged(dir + "/latest.tmp.Ab12Cd", std::chrono::hours(1));
  WriteAged(dir + "/step-000000004/stage-001-of-002.safetensors.tmp.Xy34Zw", std::chrono::hours(1));
  // Not a leftover of this commit's age (a temporary being written now) and not gpipe's.
  WriteAged(dir + "/latest.tmp.Fresh1", -std::chrono::hours(1));
  WriteAged(dir + "/notes.tmp.Ab12Cd", std::chrono::hours(1));

  std::vector<std::string> removed;
  WriteTwoStageCheckpoint(dir, 6, CheckpointRetention{}, &removed);
  EXPECT_EQ(StepsIn(dir), Steps({4, 6}));
  EXPECT_EQ(removed, std::vector<std::string>({dir + "/step-000000009", dir + "/step-000000003",
                                               dir + "/latest.tmp.Ab12Cd",
                                               dir + "/step-000000004/"
                                                     "stage-001-of-002.safetensors.tmp.Xy34Zw"}));
  EXPECT_TRUE(fs::exists(dir + "/latest.tmp.Fresh1"));
  EXPECT_TRUE(fs::exists(dir + "/notes.tmp.Ab12Cd"));
  EXPECT_EQ(*ReadLatestCheckpoint(dir), dir + "/step-000000006");
}

TEST(CheckpointRetentionTest, ARunThatResumedEarlierLeavesNewerCompleteCheckpoints) {
  const std::string dir = FreshTempDir();
  for (int64_t step : {2, 4, 6, 8}) WriteTwoStageCheckpoint(dir, step);
  // Resumed from step 2 with keep_last 2: step 4 is rewritten; 8 and 6 are not counted.
  WriteTwoStageCheckpoint(dir, 4, /*keep_last=*/2);
  EXPECT_EQ(StepsIn(dir), Steps({2, 4, 6, 8}));
  WriteTwoStageCheckpoint(dir, 5, /*keep_last=*/2);
  EXPECT_EQ(StepsIn(dir), Steps({4, 5, 6, 8}));
}

TEST(CheckpointRetentionTest, StartingOverRemovesAnEarlierRunsCheckpointsOnceItsOwnIsComplete) {
  const std::string dir = FreshTempDir();
  for (int64_t step : {2, 4, 100}) WriteTwoStageCheckpoint(dir, step);
  // This run's first save: until it commits, the earlier run's checkpoints are all there.
  ASSERT_TRUE(PrepareCheckpoint(dir, 5).ok());
  EXPECT_EQ(StepsIn(dir), Steps({2, 4, 5, 100}));
  EXPECT_EQ(*ReadLatestCheckpoint(dir), dir + "/step-000000100");
  std::vector<std::string> removed;
  WriteTwoStageCheckpoint(dir, 5, CheckpointRetention{.keep_last = 2, .this_runs_steps = {{}}},
                          &removed);
  EXPECT_EQ(StepsIn(dir), Steps({5}));
  EXPECT_EQ(removed, std::vector<std::string>({dir + "/step-000000100", dir + "/step-000000004",
                                               dir + "/step-000000002"}));
  EXPECT_EQ(*ReadLatestCheckpoint(dir), dir + "/step-000000005");
  // keep_last counts this run's checkpoints only.
  WriteTwoStageCheckpoint(dir, 10, CheckpointRetention{.keep_last = 2, .this_runs_steps = {{5}}});
  EXPECT_EQ(StepsIn(dir), Steps({5, 10}));
  WriteTwoStageCheckpoint(dir, 15,
                          CheckpointRetention{.keep_last = 2, .this_runs_steps = {{5, 10}}});
  EXPECT_EQ(StepsIn(dir), Steps({10, 15}));
}

TEST(CheckpointRetentionTest, StartingOverAtAStepAnEarlierRunSavedRewritesIt) {
  const std::string dir = FreshTempDir();
  for (int64_t step : {1, 2, 3}) WriteTwoStageCheckpoint(dir, step);
  WriteTwoStageCheckpoint(dir, 3, CheckpointRetention{.keep_last = 0, .this_runs_steps = {{}}});
  EXPECT_EQ(StepsIn(dir), Steps({3}));
  EXPECT_EQ(*ReadLatestCheckpoint(dir), dir + "/step-000000003");
  WriteTwoStageCheckpoint(dir, 1, CheckpointRetention{.this_runs_steps = {{}}});
  // A second run starting over: step 3 is an earlier run's, as far as this one knows.
  EXPECT_EQ(StepsIn(dir), Steps({1}));
}

}  // namespace
}  // namespace gpipe

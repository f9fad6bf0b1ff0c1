// A run's checks of its checkpoint directory before it starts: probing it by doing what a save
// does, and what complete checkpoint it holds already.
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/ckpt/checkpoint_inventory.h"
#include "runtime/ckpt/checkpoint_layout.h"
#include "runtime/ckpt/checkpoint_probe.h"
#include "tests/ckpt/checkpoint_fixture.h"

namespace gpipe {
namespace {

namespace fs = std::filesystem;
using ::gpipe::testing::Contains;
using ::gpipe::testing::FreshTempDir;
using ::gpipe::testing::WriteText;
using ::gpipe::testing::WriteTwoStageCheckpoint;

TEST(ProbeCheckpointDirectoryTest, CreatesTheDirectoryAndLeavesNothingBehind) {
  const std::string dir = FreshTempDir() + "/new/ckpt";
  ASSERT_TRUE(ProbeCheckpointDirectory(dir).ok());
  EXPECT_TRUE(fs::is_directory(dir));
  EXPECT_TRUE(fs::is_empty(dir));
  ASSERT_TRUE(ProbeCheckpointDirectory(dir).ok());  // an existing one too
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST(ProbeCheckpointDirectoryTest, NamesTheStepThatFailed) {
  const std::string base = FreshTempDir();
  WriteText(base + "/file", "x");
  absl::Status status = ProbeCheckpointDirectory(base + "/file");
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(status, "checkpoint.dir " + base + "/file: cannot create it (")) << status;
  status = ProbeCheckpointDirectory(base + "/file/below");
  EXPECT_TRUE(Contains(status, "checkpoint.dir " + base + "/file/below: cannot create it ("))
      << status;
  // A directory where nothing can be created, even by root.
  status = ProbeCheckpointDirectory("/proc/self");
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(status, "checkpoint.dir /proc/self: cannot create a file in it ("))
      << status;
  if (::geteuid() != 0) {
    fs::create_directories(base + "/read-only");
    fs::permissions(base + "/read-only", fs::perms::owner_read | fs::perms::owner_exec);
    status = ProbeCheckpointDirectory(base + "/read-only");
    EXPECT_TRUE(Contains(status, "cannot create a file in it (Permission denied)")) << status;
    fs::permissions(base + "/read-only", fs::perms::owner_all);
  }
}

TEST(NewestCompleteCheckpointTest, PrefersLatestThenTheHighestReadableStep) {
  const std::string dir = FreshTempDir();
  absl::StatusOr<std::optional<CheckpointEntry>> newest = NewestCompleteCheckpoint(dir + "/none");
  ASSERT_TRUE(newest.ok()) << newest.status();
  EXPECT_FALSE(newest->has_value());
  fs::create_directories(dir + "/step-000000001");  // incomplete: not counted
  EXPECT_FALSE(NewestCompleteCheckpoint(dir)->has_value());

  for (int64_t step : {2, 4, 6}) WriteTwoStageCheckpoint(dir, step);
  EXPECT_EQ((*NewestCompleteCheckpoint(dir))->path, dir + "/step-000000006");
  ASSERT_TRUE(WriteLatestCheckpoint(dir, "step-000000004").ok());
  EXPECT_EQ((*NewestCompleteCheckpoint(dir))->step, 4);
  // latest naming nothing readable: the highest step whose manifest reads.
  WriteText(dir + "/latest", "garbage");
  WriteText(dir + "/step-000000006/manifest.pbtxt", "");
  newest = NewestCompleteCheckpoint(dir);
  ASSERT_TRUE(newest.ok() && newest->has_value()) << newest.status();
  EXPECT_EQ((*newest)->step, 4);
  EXPECT_TRUE((*newest)->complete);
  fs::remove(dir + "/latest");
  fs::create_symlink(dir + "/step-000000004", dir + "/latest");
  EXPECT_EQ(NewestCompleteCheckpoint(dir).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace gpipe

// A run's checks of its checkpoint directory before it starts: probing it by doing what a save
// does.
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/ckpt/checkpoint_probe.h"
#include "tests/ckpt/checkpoint_fixture.h"

namespace gpipe {
namespace {

namespace fs = std::filesystem;
using ::gpipe::testing::Contains;
using ::gpipe::testing::FreshTempDir;
using ::gpipe::testing::WriteText;

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

}  // namespace
}  // namespace gpipe

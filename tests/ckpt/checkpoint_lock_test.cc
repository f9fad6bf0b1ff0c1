// CheckpointDirLock: one holder at a time, whether the other is this process or another; the
// holder is named to the one refused; the lock goes with the holder (destruction, exit).
#include "runtime/ckpt/checkpoint_lock.h"

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/core/file_io.h"
#include "tests/ckpt/checkpoint_fixture.h"

namespace gpipe {
namespace {

namespace fs = std::filesystem;
using ::gpipe::testing::Contains;
using ::gpipe::testing::FreshTempDir;
using ::gpipe::testing::WriteText;

constexpr char kInUse[] = "is in use by another job";

TEST(CheckpointDirLockTest, ASecondAcquireConflictsAndNamesTheHolder) {
  const std::string dir = FreshTempDir() + "/a/b/ckpt";  // parents created
  absl::StatusOr<CheckpointDirLock> held = CheckpointDirLock::Acquire(dir);
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_EQ(held->path(), dir + "/lock");
  const std::string line = *ReadWholeFile(dir + "/lock");
  EXPECT_EQ(line, held->holder() + "\n");
  EXPECT_TRUE(line.starts_with("host=")) << line;
  EXPECT_NE(line.find(absl::StrCat(" pid=", ::getpid(), " started=")), std::string::npos) << line;
  EXPECT_TRUE(line.ends_with("Z\n")) << line;

  // Another open file description of the same file, in the same process: refused.
  const absl::Status second = CheckpointDirLock::Acquire(dir).status();
  EXPECT_EQ(second.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(second, absl::StrCat("checkpoint.dir ", dir, " ", kInUse, " (",
                                            held->holder(), "): two jobs must not share")))
      << second;
  EXPECT_TRUE(Contains(second, "give this run its own checkpoint.dir or stop the other job"));
  // The refused attempt left the holder's line alone.
  EXPECT_EQ(*ReadWholeFile(dir + "/lock"), line);
}

TEST(CheckpointDirLockTest, ReleasedOnDestructionAndKeptAcrossAMove) {
  const std::string dir = FreshTempDir();
  {
    absl::StatusOr<CheckpointDirLock> held = CheckpointDirLock::Acquire(dir);
    ASSERT_TRUE(held.ok()) << held.status();
    CheckpointDirLock moved = *std::move(held);
    EXPECT_FALSE(CheckpointDirLock::Acquire(dir).ok());  // still held by `moved`
  }
  EXPECT_TRUE(fs::exists(dir + "/lock"));  // the file stays, harmless
  absl::StatusOr<CheckpointDirLock> again = CheckpointDirLock::Acquire(dir);
  EXPECT_TRUE(again.ok()) << again.status();
}

TEST(CheckpointDirLockTest, AnotherProcessHoldsItUntilItExits) {
  const std::string dir = FreshTempDir();
  int ready[2], finish[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(finish), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    absl::StatusOr<CheckpointDirLock> held = CheckpointDirLock::Acquire(dir);
    const char acquired = held.ok() ? '1' : '0';
    (void)!::write(ready[1], &acquired, 1);
    char go;
    (void)!::read(finish[0], &go, 1);
    ::_exit(0);  // the lock goes with the process
  }
  char acquired = 0;
  ASSERT_EQ(::read(ready[0], &acquired, 1), 1);
  ASSERT_EQ(acquired, '1');
  const absl::Status refused = CheckpointDirLock::Acquire(dir).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(refused, absl::StrCat(kInUse, " (host=")));
  EXPECT_TRUE(Contains(refused, absl::StrCat(" pid=", child, " started="))) << refused;
  ASSERT_EQ(::write(finish[1], "x", 1), 1);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  absl::StatusOr<CheckpointDirLock> mine = CheckpointDirLock::Acquire(dir);
  EXPECT_TRUE(mine.ok()) << mine.status();
  for (int fd : {ready[0], ready[1], finish[0], finish[1]}) ::close(fd);
}

TEST(CheckpointDirLockTest, AnEmptyLockFileMeansTheHolderIsUnknown) {
  const std::string dir = FreshTempDir();
  absl::StatusOr<CheckpointDirLock> held = CheckpointDirLock::Acquire(dir);
  ASSERT_TRUE(held.ok()) << held.status();
  WriteText(dir + "/lock", "");  // as between another holder's flock and its write
  const absl::Status refused = CheckpointDirLock::Acquire(dir).status();
  EXPECT_TRUE(Contains(refused, absl::StrCat(kInUse, " (holder unknown)"))) << refused;
}

TEST(CheckpointDirLockTest, AnUnusableDirectoryIsNamed) {
  const std::string base = FreshTempDir();
  WriteText(base + "/file", "x");
  absl::Status status = CheckpointDirLock::Acquire(base + "/file/ckpt").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(status, "checkpoint.dir " + base + "/file/ckpt: cannot create it"))
      << status;
  // A directory where nothing can be created, even by root.
  status = CheckpointDirLock::Acquire("/proc/self").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(status, "cannot open the lock file /proc/self/lock")) << status;
  // The lock file must not be a link (it is opened with O_NOFOLLOW).
  fs::create_directories(base + "/linked");
  fs::create_symlink(base + "/file", base + "/linked/lock");
  status = CheckpointDirLock::Acquire(base + "/linked").status();
  EXPECT_TRUE(Contains(status, "cannot open the lock file " + base + "/linked/lock")) << status;
}

}  // namespace
}  // namespace gpipe

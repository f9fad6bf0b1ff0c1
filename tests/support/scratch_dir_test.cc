// ScratchDir: only the process that made a directory removes it.
#include "tests/support/scratch_dir.h"

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <new>

#include "gtest/gtest.h"

namespace gpipe::testing {
namespace {

// A forked child that destroys its copy of the object (as exit() destroys the static
// ProcessScratchDir) leaves the parent's directory in place; the parent's destructor removes it.
TEST(ScratchDirTest, AForkedChildDoesNotRemoveItsParentsDirectory) {
  alignas(ScratchDir) unsigned char storage[sizeof(ScratchDir)];
  ScratchDir* dir = new (storage) ScratchDir("fork");
  const std::string path = dir->path();
  ASSERT_TRUE(std::filesystem::is_directory(path));
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    dir->~ScratchDir();
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_TRUE(std::filesystem::is_directory(path));
  dir->~ScratchDir();
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace gpipe::testing

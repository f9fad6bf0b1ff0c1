#include "launcher/executable_lookup.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace gpipe {
namespace {

namespace fs = std::filesystem;

class ExecutableLookupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) / "gpipe_executable_lookup";
    fs::remove_all(root_);
    fs::create_directories(root_ / "a");
    fs::create_directories(root_ / "b");
  }
  std::string Make(const std::string& relative, bool executable) {
    const fs::path path = root_ / relative;
    std::ofstream(path) << "#!/bin/sh\n";
    ::chmod(path.c_str(), executable ? 0755 : 0644);
    return path.string();
  }
  std::string Dir(const std::string& name) const { return (root_ / name).string(); }
  fs::path root_;
};

TEST_F(ExecutableLookupTest, FindsTheFirstExecutableOnPath) {
  Make("a/srun", false);  // not executable: skipped
  const std::string found = Make("b/srun", true);
  auto path = FindExecutable("srun", Dir("a") + ":" + Dir("b"));
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, found);
}

TEST_F(ExecutableLookupTest, AMissingProgramIsNotFoundNamingThePath) {
  auto path = FindExecutable("srun", Dir("a"));
  ASSERT_FALSE(path.ok());
  EXPECT_EQ(path.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(path.status().message(), "srun: not found on PATH (" + Dir("a") + ")");
}

TEST_F(ExecutableLookupTest, ADirectoryOfThatNameIsNotAProgram) {
  fs::create_directories(root_ / "a" / "mpirun");
  EXPECT_FALSE(FindExecutable("mpirun", Dir("a")).ok());
}

TEST_F(ExecutableLookupTest, ANameWithASlashIsAPath) {
  const std::string found = Make("a/mpirun", true);
  auto path = FindExecutable(found, "");
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, found);
  EXPECT_FALSE(FindExecutable(Dir("b") + "/mpirun", "/usr/bin").ok());
}

}  // namespace
}  // namespace gpipe

#include "runtime/core/file_ownership.h"

#include <unistd.h>

#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/file_fixtures.h"

namespace gpipe {
namespace {

using ::gpipe::testing::FreshTempDir;
using ::gpipe::testing::WriteFile;
using ::testing::HasSubstr;

class FileOwnershipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshTempDir();
    plan_ = dir_ + "/plan.pbtxt";
    WriteFile(plan_, "name: \"p\"\n");
  }
  std::string dir_;
  std::string plan_;
};

TEST_F(FileOwnershipTest, DistinctFilesPass) {
  EXPECT_TRUE(CheckRunFiles({.inputs = {{"the plan", plan_}},
                             .kept_dirs = {{"checkpoint.dir", dir_ + "/ckpt"}},
                             .outputs = {{"--export", dir_ + "/out.safetensors"},
                                         {"--metrics-out", dir_ + "/metrics.jsonl"}}})
                  .ok());
}

TEST_F(FileOwnershipTest, OutputThatIsAnInputIsRefusedNamingBoth) {
  const absl::Status status =
      CheckRunFiles({.inputs = {{"the plan", plan_}}, .outputs = {{"--export", plan_}}});
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("--export"));
  EXPECT_THAT(status.message(), HasSubstr("the same file as the plan"));
}

TEST_F(FileOwnershipTest, LinksToAnInputAreTheSameFile) {
  std::filesystem::create_symlink(plan_, dir_ + "/soft");
  std::filesystem::create_hard_link(plan_, dir_ + "/hard");
  std::filesystem::create_directory(dir_ + "/sub");
  for (const std::string& out : {dir_ + "/soft", dir_ + "/hard", dir_ + "/sub/../plan.pbtxt"}) {
    EXPECT_THAT(
        CheckRunFiles({.inputs = {{"the plan", plan_}}, .outputs = {{"--trace", out}}}).message(),
        HasSubstr("--trace"))
        << out;
  }
}

TEST_F(FileOwnershipTest, TwoOutputsOnOnePathAreRefusedEvenBeforeTheyExist) {
  std::filesystem::create_symlink(dir_ + "/m.jsonl", dir_ + "/link.jsonl");  // dangling
  const absl::Status status = CheckRunFiles(
      {.outputs = {{"--export", dir_ + "/m.jsonl"}, {"--metrics-out", dir_ + "/link.jsonl"}}});
  EXPECT_THAT(status.message(), HasSubstr("--metrics-out and --export name the same file"));
}

TEST_F(FileOwnershipTest, OutputsInsideAKeptDirectoryAreRefused) {
  const std::string ckpt = dir_ + "/ckpt";
  // Absent yet: decided by the path.
  EXPECT_THAT(CheckRunFiles({.kept_dirs = {{"checkpoint.dir", ckpt}},
                             .outputs = {{"--export", ckpt + "/latest"}}})
                  .message(),
              HasSubstr("inside checkpoint.dir"));
  std::filesystem::create_directories(ckpt + "/step-000000002");
  WriteFile(ckpt + "/step-000000002/stage-000-of-001.safetensors", "x");
  std::filesystem::create_symlink(ckpt + "/step-000000002", dir_ + "/step-link");
  EXPECT_THAT(CheckRunFiles({.kept_dirs = {{"checkpoint.dir", ckpt}},
                             .outputs = {{"--export", dir_ + "/step-link/new.safetensors"}}})
                  .message(),
              HasSubstr("inside checkpoint.dir"));
  // A hard link from outside to a shard.
  std::filesystem::create_hard_link(ckpt + "/step-000000002/stage-000-of-001.safetensors",
                                    dir_ + "/shard-copy");
  EXPECT_THAT(CheckRunFiles({.kept_dirs = {{"checkpoint.dir", ckpt}},
                             .outputs = {{"--export", dir_ + "/shard-copy"}}})
                  .message(),
              HasSubstr("hard link to"));
  // A sibling whose name starts like the directory's is outside it.
  EXPECT_TRUE(CheckRunFiles({.kept_dirs = {{"checkpoint.dir", ckpt}},
                             .outputs = {{"--export", ckpt + "-export.safetensors"}}})
                  .ok());
}

TEST_F(FileOwnershipTest, SymlinkLoopIsNamedAsSuch) {
  std::filesystem::create_symlink(dir_ + "/b", dir_ + "/a");
  std::filesystem::create_symlink(dir_ + "/a", dir_ + "/b");
  EXPECT_THAT(CheckRunFiles({.outputs = {{"--export", dir_ + "/a"}}}).message(),
              HasSubstr("symlink loop"));
}

TEST_F(FileOwnershipTest, LaterOutputIsCheckedAgainstEverythingButItself) {
  WriteFile(dir_ + "/metrics.jsonl", "{}\n");
  const RunFiles files{.inputs = {{"the plan", plan_}},
                       .outputs = {{"--export", dir_ + "/out.safetensors"},
                                   {"--metrics-out", dir_ + "/metrics.jsonl"}}};
  EXPECT_TRUE(CheckLaterOutput(files, {"--export", dir_ + "/out.safetensors"}).ok());
  EXPECT_THAT(CheckLaterOutput(files, {"the export", dir_ + "/metrics.jsonl"}).message(),
              HasSubstr("name the same file"));
  EXPECT_THAT(CheckLaterOutput(files, {"the export", plan_}).message(),
              HasSubstr("the same file as the plan"));
}

}  // namespace
}  // namespace gpipe

// Directories a test process owns: made fresh by mkdtemp under ::testing::TempDir() and removed
// with everything in them at the end, so two processes testing at once (two checkouts, ctest -j,
// a test binary run by hand beside ctest) never write into each other's files. Fixed names
// directly under TempDir() (/tmp) were shared by every checkout on the machine.
#ifndef GPIPE_TESTS_SUPPORT_SCRATCH_DIR_H_
#define GPIPE_TESTS_SUPPORT_SCRATCH_DIR_H_

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "gtest/gtest.h"

namespace gpipe::testing {

// One directory, TempDir()/gpipe-NAME-XXXXXX, removed when the object is destroyed in the process
// that made it: a forked child that destroys its copy (exit() runs the static ProcessScratchDir's
// destructor) leaves the parent's directory alone. NAME is the running test's Suite.Name by
// default (a fixture member gets one per test).
class ScratchDir {
 public:
  ScratchDir() : ScratchDir(RunningTestName()) {}
  explicit ScratchDir(std::string name) {
    for (char& c : name) {
      if (c == '/') c = '_';
    }
    std::string pattern =
        (std::filesystem::path(::testing::TempDir()) / ("gpipe-" + name + "-XXXXXX")).string();
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (::mkdtemp(buffer.data()) == nullptr) {
      // Nothing can be tested without somewhere to write: say where, and stop.
      std::fprintf(stderr, "cannot make a scratch directory %s\n", pattern.c_str());
      std::abort();
    }
    path_ = buffer.data();
  }
  ~ScratchDir() {
    if (::getpid() != creator_) return;
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  static std::string RunningTestName() {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    if (info == nullptr) return "test";
    return std::string(info->test_suite_name()) + "." + info->name();
  }

  std::string path_;
  pid_t creator_ = ::getpid();
};

// The test process's own directory, made on first use and removed when the process exits (not
// when a forked child exits): for helpers that write files outside any one test's fixture.
inline const std::string& ProcessScratchDir() {
  static const ScratchDir dir("process");
  return dir.path();
}

}  // namespace gpipe::testing

#endif  // GPIPE_TESTS_SUPPORT_SCRATCH_DIR_H_

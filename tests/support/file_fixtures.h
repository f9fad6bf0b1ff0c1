// File fixtures for tests: a fresh temporary directory per test, whole-file I/O, and the test
// target's testdata directory (where it defines GPIPE_TESTDATA_DIR).
#ifndef GPIPE_TESTS_SUPPORT_FILE_FIXTURES_H_
#define GPIPE_TESTS_SUPPORT_FILE_FIXTURES_H_

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/support/scratch_dir.h"

namespace gpipe::testing {

// A directory unique to the running test in this process's ProcessScratchDir() (removed at exit),
// emptied first.
inline std::string FreshTempDir() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "." + info->name();
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  const std::filesystem::path dir = std::filesystem::path(ProcessScratchDir()) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

#ifdef GPIPE_TESTDATA_DIR
// A file under the test's testdata directory (the test target defines GPIPE_TESTDATA_DIR).
inline std::string TestdataPath(const std::string& name) {
  return std::string(GPIPE_TESTDATA_DIR) + "/" + name;
}
#endif

}  // namespace gpipe::testing

#endif  // GPIPE_TESTS_SUPPORT_FILE_FIXTURES_H_

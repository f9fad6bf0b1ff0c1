// The hostile-input corpus (tests/hostile/CASES): every bad plan, data file, safetensors file,
// checkpoint and special file there is fed to the real programs, which must refuse it with its
// expected error, non-zero, within a time limit (no crash, no hang, no memory blow-up).
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "tests/support/process_runner.h"
#include "tests/support/scratch_dir.h"

namespace gpipe {
namespace {

namespace fs = std::filesystem;

struct Case {
  std::string how, input, expected;
  int line = 0;
};

std::vector<Case> ReadCases(const std::string& corpus) {
  std::ifstream in(corpus + "/CASES");
  std::vector<Case> cases;
  int line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> fields = absl::StrSplit(line, '\t');
    EXPECT_EQ(fields.size(), 3u) << "CASES:" << line_number << ": " << line;
    if (fields.size() == 3) cases.push_back({fields[0], fields[1], fields[2], line_number});
  }
  return cases;
}

class HostileInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    corpus_ = testing::SourcePath("tests/hostile");
    scratch_ = scratch_dir_.path();
    fs::create_directories(scratch_ + "/directory");
    ASSERT_EQ(::mkfifo((scratch_ + "/fifo").c_str(), 0644), 0);
    fs::create_symlink(scratch_ + "/loop-b", scratch_ + "/loop");
    fs::create_symlink(scratch_ + "/loop", scratch_ + "/loop-b");
  }

  testing::ProcessResult Worker(const std::vector<std::string>& args,
                                const std::string& plan = "plans/base.pbtxt") {
    std::vector<std::string> argv = testing::MpirunPrefix(1);
    argv.insert(argv.end(), {testing::BinPath("gpipe-worker"), "--plan", corpus_ + "/" + plan});
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::RunProcess(argv, 60);
  }

  // The special file a `special` case names.
  std::string Special(const std::string& name) const {
    if (name == "fifo" || name == "directory" || name == "loop") return scratch_ + "/" + name;
    return name;
  }

  const testing::ScratchDir scratch_dir_;  // this test's own, removed after it
  std::string corpus_, scratch_;
};

TEST_F(HostileInputTest, EveryInputOfTheCorpusIsRefusedWithItsError) {
  const std::vector<Case> cases = ReadCases(corpus_);
  ASSERT_GE(cases.size(), 40u);
  int runs = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat("CASES:", c.line, ": ", c.how, " ", c.input));
    std::vector<testing::ProcessResult> results;
    if (c.how == "check") {
      results.push_back(testing::RunProcess(
          {testing::BinPath("gpipe-plan"), "check", corpus_ + "/" + c.input}, 60));
    } else if (c.how == "run") {
      results.push_back(Worker({"--override", c.input}));
    } else if (c.how == "runplan") {
      results.push_back(Worker({}, c.input));
    } else if (c.how == "init") {
      results.push_back(Worker({"--init-from", corpus_ + "/" + c.input}));
    } else if (c.how == "resume") {
      results.push_back(Worker({"--resume", corpus_ + "/" + c.input}));
    } else if (c.how == "flags") {
      const std::vector<std::string> flags = absl::StrSplit(c.input, ' ');
      results.push_back(Worker(flags));
      std::vector<std::string> run = {testing::BinPath("gpipe-run"), corpus_ + "/plans/base.pbtxt",
                                      "--dry-run"};
      run.insert(run.end(), flags.begin(), flags.end());
      results.push_back(testing::RunProcess(run, 60));
    } else if (c.how == "balance") {
      std::vector<std::string> balance = {testing::BinPath("gpipe-plan"), "balance",
                                          corpus_ + "/plans/base.pbtxt"};
      for (absl::string_view flag : absl::StrSplit(c.input, ' ')) balance.emplace_back(flag);
      results.push_back(testing::RunProcess(balance, 60));
    } else if (c.how == "special") {
      results.push_back(
          testing::RunProcess({testing::BinPath("gpipe-plan"), "check", Special(c.input)}, 60));
      results.push_back(Worker({"--init-from", Special(c.input)}));
    } else {
      ADD_FAILURE() << "unknown kind " << c.how;
      continue;
    }
    for (const testing::ProcessResult& result : results) {
      ++runs;
      EXPECT_FALSE(result.timed_out) << result.output;
      EXPECT_NE(result.exit_code, 0) << result.output;
      // Refused, not crashed: exit codes 1 and 2 are gpipe's own.
      EXPECT_LE(result.exit_code, 2) << result.output;
      EXPECT_TRUE(absl::StrContains(result.output, c.expected))
          << "expected: " << c.expected << "\n"
          << result.output;
      EXPECT_FALSE(absl::StrContains(result.output, "Signal:")) << result.output;
    }
  }
  EXPECT_TRUE(fs::is_fifo(scratch_ + "/fifo"));
  std::printf(
      "[ hostile ] %zu corpus inputs, %d program runs: every one refused with its "
      "error\n",
      cases.size(), runs);
}

}  // namespace
}  // namespace gpipe

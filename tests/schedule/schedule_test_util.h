// Helpers shared by the schedule tests: instruction lists as strings (readable failures) and
// edits that break a GPipe program in one place.
#ifndef GPIPE_TESTS_SCHEDULE_SCHEDULE_TEST_UTIL_H_
#define GPIPE_TESTS_SCHEDULE_SCHEDULE_TEST_UTIL_H_

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/schedule/instruction.h"
#include "runtime/schedule/program.h"

namespace gpipe::schedule::testing {

inline std::vector<std::string> Strings(const StageProgram& program) {
  std::vector<std::string> out;
  for (const Instruction& instruction : program.instructions) out.push_back(ToString(instruction));
  return out;
}

// Index of `instruction` in stage `stage`'s list; fails the test when absent.
inline int IndexOf(const Program& program, int stage, const Instruction& instruction) {
  const std::vector<Instruction>& list = program.stage_programs[stage].instructions;
  const auto it = std::find(list.begin(), list.end(), instruction);
  EXPECT_NE(it, list.end()) << ToString(instruction) << " not on stage " << stage;
  return static_cast<int>(it - list.begin());
}

inline Program GpipeProgram(int stages, int micro_batches) {
  absl::StatusOr<Program> program = BuildProgram(pb::GPIPE, stages, micro_batches);
  EXPECT_TRUE(program.ok()) << program.status();
  return *std::move(program);
}

}  // namespace gpipe::schedule::testing

#endif  // GPIPE_TESTS_SCHEDULE_SCHEDULE_TEST_UTIL_H_

// Helpers shared by the schedule tests: instruction lists as strings (readable failures),
// programs built and verified with the failure reported where it happens, and the shapes each
// schedule kind accepts.
#ifndef GPIPE_TESTS_SCHEDULE_SCHEDULE_TEST_UTIL_H_
#define GPIPE_TESTS_SCHEDULE_SCHEDULE_TEST_UTIL_H_

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/schedule/build_program.h"
#include "runtime/schedule/instruction.h"
#include "runtime/schedule/verifier.h"

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

// "ZERO_BUBBLE_H1 K=4 M=8" (and " v=2" when there are chunks): how failures name a shape.
inline std::string ShapeName(pb::Schedule kind, int stages, int micro_batches,
                             int virtual_stages = 1) {
  std::string name = absl::StrCat(pb::Schedule_Name(kind), " K=", stages, " M=", micro_batches);
  if (virtual_stages != 1) absl::StrAppend(&name, " v=", virtual_stages);
  return name;
}

// BuildProgram that fails the test (and returns an empty Program) on error.
inline Program BuildOk(pb::Schedule kind, int stages, int micro_batches, int virtual_stages = 1) {
  absl::StatusOr<Program> program = BuildProgram(kind, stages, micro_batches, virtual_stages);
  EXPECT_TRUE(program.ok()) << ShapeName(kind, stages, micro_batches, virtual_stages) << ": "
                            << program.status();
  return program.ok() ? *std::move(program) : Program{};
}

// VerifyProgram that fails the test (and returns an empty result) on error.
inline VerifyResult VerifyOrFail(const Program& program, const OpCosts& costs = {}) {
  absl::StatusOr<VerifyResult> result = VerifyProgram(program, costs);
  EXPECT_TRUE(result.ok()) << ShapeName(program.kind, program.stages, program.micro_batches,
                                        program.chunks)
                           << ": " << result.status();
  return result.ok() ? *std::move(result) : VerifyResult{};
}

// The virtual-stage counts the tests try for `kind`: 2..4 chunks for INTERLEAVED_1F1B, 2 for the
// V schedules, else 1.
inline std::vector<int> VirtualStagesToTry(pb::Schedule kind) {
  if (kind == pb::INTERLEAVED_1F1B) return {2, 3, 4};
  if (kind == pb::ZERO_BUBBLE_V || kind == pb::DUALPIPE_V) return {2};
  return {1};
}

// Micro-batch m's compute instructions of `Kind` on a stage, in program order, one list per
// chunk: what the gradient-accumulation order tests read.
template <typename Kind>
std::vector<std::vector<int>> MicroBatchOrder(const StageProgram& stage, int chunks) {
  std::vector<std::vector<int>> order(chunks);
  for (const Instruction& instruction : stage.instructions) {
    if (const auto* op = std::get_if<Kind>(&instruction))
      order[op->chunk].push_back(op->micro_batch);
  }
  return order;
}

// 0, 1, ..., count-1.
inline std::vector<int> Ascending(int count) {
  std::vector<int> values(count);
  for (int i = 0; i < count; ++i) values[i] = i;
  return values;
}

}  // namespace gpipe::schedule::testing

#endif  // GPIPE_TESTS_SCHEDULE_SCHEDULE_TEST_UTIL_H_

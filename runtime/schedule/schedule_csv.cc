#include "runtime/schedule/schedule_csv.h"

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpipe::schedule {
namespace {

// The action an instruction is the compute of, or nullopt for transfers, loads and step ends.
struct ActionOf {
  const Topology& topology;
  int stage;

  std::optional<std::string> Name(char letter, int micro_batch, int chunk) const {
    return absl::StrCat(topology.VirtualStage({stage, chunk}), std::string(1, letter), micro_batch);
  }
  std::optional<std::string> operator()(const Forward& i) const {
    return Name('F', i.micro_batch, i.chunk);
  }
  std::optional<std::string> operator()(const Backward& i) const {
    return Name('B', i.micro_batch, i.chunk);
  }
  std::optional<std::string> operator()(const BackwardInput& i) const {
    return Name('I', i.micro_batch, i.chunk);
  }
  std::optional<std::string> operator()(const BackwardWeight& i) const {
    return Name('W', i.micro_batch, i.chunk);
  }
  template <typename Other>
  std::optional<std::string> operator()(const Other&) const {
    return std::nullopt;
  }
};

}  // namespace

absl::StatusOr<std::string> ScheduleCsv(const Program& program) {
  if (program.forward_only()) {
    return absl::InvalidArgumentError(
        "a forward-only (EVAL) program has no training schedule to export");
  }
  const Topology topology = program.topology();
  std::string csv;
  for (const StageProgram& stage : program.stage_programs) {
    std::vector<std::string> actions;
    const ActionOf action_of{topology, stage.stage};
    for (const Instruction& instruction : stage.instructions) {
      if (std::optional<std::string> action = std::visit(action_of, instruction)) {
        actions.push_back(*std::move(action));
      }
    }
    absl::StrAppend(&csv, absl::StrJoin(actions, ","), "\n");
  }
  return csv;
}

}  // namespace gpipe::schedule

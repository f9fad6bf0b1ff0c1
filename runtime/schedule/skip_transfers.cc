#include "runtime/schedule/skip_transfers.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/schedule/receive_order.h"

namespace gpipe::schedule {
namespace {

bool IsInputGradient(const Instruction& instruction) {
  return std::holds_alternative<Backward>(instruction) ||
         std::holds_alternative<BackwardInput>(instruction);
}

}  // namespace

absl::Status AddSkipTransfers(std::vector<SkipRoute> routes, Program& program) {
  const Topology topology = program.topology();
  std::sort(routes.begin(), routes.end(),
            [](const SkipRoute& a, const SkipRoute& b) { return a.layer < b.layer; });
  for (const SkipRoute& route : routes) {
    if (route.from < 0 || route.to >= topology.virtual_stages() || route.from >= route.to) {
      return absl::InvalidArgumentError(absl::StrCat(
          "skip connection into layer ", route.layer, " runs from virtual stage ", route.from,
          " to ", route.to, "; it must go forward within 0..", topology.virtual_stages() - 1));
    }
  }
  for (const StageProgram& stage : program.stage_programs) {
    for (const Instruction& instruction : stage.instructions) {
      if (SkipLayerOf(instruction)) {
        return absl::InvalidArgumentError(
            absl::StrCat("stage ", stage.stage, " already has ", ToString(instruction),
                         "; skip transfers are added once, to a program without them"));
      }
    }
  }
  program.skips = std::move(routes);
  if (program.skips.empty()) return absl::OkStatus();
  const bool training = !program.forward_only();
  for (StageProgram& stage : program.stage_programs) {
    std::vector<Instruction> out;
    out.reserve(stage.instructions.size());
    for (const Instruction& instruction : stage.instructions) {
      const std::optional<int> m = MicroBatchOf(instruction);
      const int chunk = ChunkOf(instruction);
      const int here = topology.VirtualStage({stage.stage, chunk});
      const bool forward = std::holds_alternative<Forward>(instruction);
      const bool input_gradient = training && IsInputGradient(instruction);
      // Receives the instruction needs, before it.
      for (const SkipRoute& route : program.skips) {
        if (forward && route.to == here) out.push_back(RecvSkip{*m, chunk, route.layer});
        if (input_gradient && route.from == here) {
          out.push_back(RecvSkipGrad{*m, chunk, route.layer});
        }
      }
      out.push_back(instruction);
      // Sends of what it produced, right after it.
      for (const SkipRoute& route : program.skips) {
        if (forward && route.from == here) out.push_back(SendSkip{*m, chunk, route.layer});
        if (input_gradient && route.to == here) {
          out.push_back(SendSkipGrad{*m, chunk, route.layer});
        }
      }
    }
    stage.instructions = std::move(out);
  }
  MatchReceivesToSends(program);
  return absl::OkStatus();
}

}  // namespace gpipe::schedule

#include "runtime/schedule/simulator.h"

#include <algorithm>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"

namespace gpipe::schedule {
namespace {

// One uniform cost, or its per-virtual-stage override.
double CostAt(double uniform, const std::vector<double>& per_virtual_stage, int virtual_stage) {
  return per_virtual_stage.empty() ? uniform : per_virtual_stage[virtual_stage];
}

// How long a compute instruction occupies its stage; nullopt for everything else.
std::optional<double> ComputeCost(const OpCosts& costs, const Topology& topology, int stage,
                                  const Instruction& instruction) {
  const int v = topology.VirtualStage({stage, ChunkOf(instruction)});
  const double input = CostAt(costs.backward_input, costs.stage_backward_input, v);
  const double weight = CostAt(costs.backward_weight, costs.stage_backward_weight, v);
  if (std::holds_alternative<Forward>(instruction)) {
    return CostAt(costs.forward, costs.stage_forward, v);
  }
  if (std::holds_alternative<Backward>(instruction)) return input + weight;
  if (std::holds_alternative<BackwardInput>(instruction)) return input;
  if (std::holds_alternative<BackwardWeight>(instruction)) return weight;
  return std::nullopt;
}

// Where one stage is: its next instruction and the time it is free to start it.
struct StageState {
  int next = 0;
  double clock = 0;
  std::vector<TimelineEntry> timeline;
};

}  // namespace

absl::StatusOr<Simulation> Simulate(const Program& program, const Transfers& transfers,
                                    const OpCosts& costs) {
  const int stages = program.stages;
  const Topology topology = program.topology();
  std::vector<StageState> state(stages);
  // Issue time of every send so far, per link, in link order.
  std::vector<std::vector<double>> sent(transfers.links().size());
  Simulation simulation;
  simulation.busy.assign(stages, 0.0);

  // Run each stage as far as it can go, round-robin, until all finish or none can move.
  // Times depend only on the dependency graph, not on the order stages are visited in.
  int finished = 0;
  while (finished < stages) {
    bool progressed = false;
    finished = 0;
    for (int s = 0; s < stages; ++s) {
      StageState& stage = state[s];
      const std::vector<Instruction>& instructions = program.stage_programs[s].instructions;
      while (stage.next < static_cast<int>(instructions.size())) {
        const int i = stage.next;
        const Instruction& instruction = instructions[i];
        const TransferSlot& slot = transfers.slot(s, i);
        const double start = stage.clock;
        double end = start;
        if (slot.link >= 0 && !slot.is_send) {
          const std::vector<double>& issued = sent[slot.link];
          if (slot.position >= static_cast<int>(issued.size())) break;  // blocked
          const Link& link = transfers.links()[slot.link];
          const double latency = link.from_stage == link.to_stage ? 0.0 : costs.send;  // local
          end = std::max(start, issued[slot.position] + latency);
        } else if (slot.link >= 0) {
          sent[slot.link].push_back(start);
        } else if (const std::optional<double> cost =
                       ComputeCost(costs, topology, s, instruction)) {
          end = start + *cost;
          simulation.busy[s] += *cost;
        } else if (std::holds_alternative<LoadMicroBatch>(instruction)) {
          end = start + costs.load;
        }
        stage.timeline.push_back({s, i, start, end});
        stage.clock = end;
        ++stage.next;
        progressed = true;
      }
      if (stage.next == static_cast<int>(instructions.size())) ++finished;
    }
    if (finished < stages && !progressed) {
      std::string message = "deadlock: no stage can progress;";
      for (int s = 0; s < stages; ++s) {
        const int i = state[s].next;
        if (i == static_cast<int>(program.stage_programs[s].instructions.size())) continue;
        const TransferSlot& slot = transfers.slot(s, i);
        const TransferEnd& send = transfers.links()[slot.link].sends[slot.position];
        absl::StrAppend(&message, " ", DescribeInstruction(program, s, i), " waits for ",
                        DescribeInstruction(program, send.stage, send.index), ";");
      }
      message.pop_back();
      absl::StrAppend(&message, ". Reorder the lists so every receive's send comes first.");
      return absl::InvalidArgumentError(message);
    }
  }

  for (StageState& stage : state) {
    simulation.makespan = std::max(simulation.makespan, stage.clock);
    simulation.timeline.insert(simulation.timeline.end(), stage.timeline.begin(),
                               stage.timeline.end());
  }
  return simulation;
}

}  // namespace gpipe::schedule

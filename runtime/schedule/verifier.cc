#include "runtime/schedule/verifier.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/schedule/simulator.h"
#include "runtime/schedule/stage_checks.h"
#include "runtime/schedule/transfers.h"

namespace gpipe::schedule {
namespace {

absl::Status CheckCost(const char* name, double value) {
  if (!std::isfinite(value) || value < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("costs.", name, " is ", value, "; costs must be finite and >= 0"));
  }
  return absl::OkStatus();
}

absl::Status CheckPerVirtualStage(const char* name, const std::vector<double>& values,
                                  const Topology& topology) {
  if (values.empty()) return absl::OkStatus();
  const int count = topology.virtual_stages();
  if (static_cast<int>(values.size()) != count) {
    return absl::InvalidArgumentError(
        absl::StrCat("costs.", name, " has ", values.size(), " entries but the program has ", count,
                     " virtual stages (", topology.stages, " stages x ", topology.chunks,
                     " chunk(s)): give one per virtual stage (index = virtual stage), or none"));
  }
  for (int v = 0; v < count; ++v) {
    RETURN_IF_ERROR(CheckCost(absl::StrCat(name, "[", v, "]").c_str(), values[v]));
  }
  return absl::OkStatus();
}

absl::Status CheckCosts(const OpCosts& costs, const Topology& topology) {
  RETURN_IF_ERROR(CheckCost("forward", costs.forward));
  RETURN_IF_ERROR(CheckCost("backward_input", costs.backward_input));
  RETURN_IF_ERROR(CheckCost("backward_weight", costs.backward_weight));
  RETURN_IF_ERROR(CheckCost("send", costs.send));
  RETURN_IF_ERROR(CheckCost("load", costs.load));
  RETURN_IF_ERROR(CheckPerVirtualStage("stage_forward", costs.stage_forward, topology));
  RETURN_IF_ERROR(
      CheckPerVirtualStage("stage_backward_input", costs.stage_backward_input, topology));
  RETURN_IF_ERROR(
      CheckPerVirtualStage("stage_backward_weight", costs.stage_backward_weight, topology));
  return absl::OkStatus();
}

absl::Status CheckShape(const Program& program) {
  if (program.stages < 1 || program.micro_batches < 1 || program.chunks < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "program has ", program.stages, " stages, ", program.micro_batches, " micro-batches and ",
        program.chunks, " chunk(s) per stage; each must be at least 1"));
  }
  if (static_cast<int>(program.stage_programs.size()) != program.stages) {
    return absl::InvalidArgumentError(absl::StrCat("program has ", program.stages, " stages but ",
                                                   program.stage_programs.size(),
                                                   " stage programs; give one per stage"));
  }
  for (int s = 0; s < program.stages; ++s) {
    if (program.stage_programs[s].stage != s) {
      return absl::InvalidArgumentError(absl::StrCat("stage program #", s, " says it is stage ",
                                                     program.stage_programs[s].stage,
                                                     "; stage programs are indexed by stage"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<VerifyResult> VerifyProgram(const Program& program, const OpCosts& costs) {
  RETURN_IF_ERROR(CheckShape(program));
  RETURN_IF_ERROR(CheckCosts(costs, program.topology()));

  // Order matters for the message a user sees: the first out-of-place instruction on a stage,
  // then unpaired or reordered transfers, then whatever a stage never does, then deadlock.
  std::vector<StageWalk> walks;
  walks.reserve(program.stages);
  for (int s = 0; s < program.stages; ++s) {
    ASSIGN_OR_RETURN(StageWalk walk, WalkStage(program, s));
    walks.push_back(std::move(walk));
  }
  const Transfers transfers = Transfers::Collect(program);
  RETURN_IF_ERROR(transfers.Check(program));
  // Every program also suits a transport that pairs point-to-point operations by issue order
  // per pair of ranks (NCCL), so the transport never constrains the schedule.
  RETURN_IF_ERROR(transfers.CheckPerPeerOrder(program));
  for (int s = 0; s < program.stages; ++s) {
    RETURN_IF_ERROR(CheckStageComplete(program, s, walks[s]));
  }
  ASSIGN_OR_RETURN(Simulation simulation, Simulate(program, transfers, costs));

  VerifyResult result;
  result.makespan = simulation.makespan;
  result.stage_bubble.resize(program.stages);
  result.peak_live_activations.resize(program.stages);
  double bubble_sum = 0;
  for (int s = 0; s < program.stages; ++s) {
    const double idle = simulation.makespan - simulation.busy[s];
    result.stage_bubble[s] = simulation.makespan > 0 ? idle / simulation.makespan : 0.0;
    bubble_sum += result.stage_bubble[s];
    result.peak_live_activations[s] = walks[s].peak_live_activations;
  }
  result.bubble_fraction = bubble_sum / program.stages;
  result.timeline = std::move(simulation.timeline);
  return result;
}

}  // namespace gpipe::schedule

// CheckStageComplete (declared in stage_checks.h): what a stage that passed WalkStage never does.
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/schedule/stage_checks.h"

namespace gpipe::schedule {
namespace {

// Why `step` of (at, m) must appear, or "" when it does not apply at this position. Only the
// first missing step of a micro-batch is reported, so later ones may assume earlier ones ran.
std::string WhyNeeded(const Program& program, StageChunk at, int m, Step step,
                      const MicroBatchSteps& seen) {
  const Topology topology = program.topology();
  const bool first = topology.IsFirst(at);
  const bool last = topology.IsLast(at);
  const bool training = !program.forward_only();
  switch (step) {
    case Step::kLoad:
      if (first && last) return "a single stage loads every micro-batch's inputs and targets";
      if (first) return "the first stage loads every micro-batch's inputs";
      if (last) return "the last stage loads every micro-batch's targets";
      return "";
    case Step::kRecvActivation:
      if (first) return "";
      return absl::StrCat("the input of micro-batch ", m, " comes from stage ",
                          topology.Previous(at).stage);
    case Step::kForward:
      return "every micro-batch is forwarded once on every stage";
    case Step::kSendActivation:
      if (last) return "";
      return absl::StrCat("micro-batch ", m, " is forwarded at instruction #",
                          seen.at(Step::kForward), " but never sent to stage ",
                          topology.Next(at).stage);
    case Step::kRecvGrad:
      if (!training || last) return "";
      return absl::StrCat("the output gradient of micro-batch ", m, " comes from stage ",
                          topology.Next(at).stage);
    case Step::kBackward:
      if (!training || seen.at(Step::kBackwardInput) >= 0) return "";
      return "every micro-batch is backwarded once on every stage";
    case Step::kBackwardInput:
      return "";  // optional: Backward does the same
    case Step::kBackwardWeight:
      if (!training || seen.at(Step::kBackwardInput) < 0) return "";
      return absl::StrCat(
          ToString(BackwardInput{m, at.chunk}), " at instruction #", seen.at(Step::kBackwardInput),
          " deferred the weight gradients, which must be accumulated before AllReduceGrads");
    case Step::kSendGrad:
      if (!training || first) return "";
      return absl::StrCat("micro-batch ", m, " is backwarded at instruction #",
                          seen.input_gradient(), " but its gradient is never sent to stage ",
                          topology.Previous(at).stage);
  }
  return "";
}

absl::Status CheckStepEnd(const Program& program, int stage, const StageWalk& walk) {
  const bool forward_only = program.forward_only();
  const bool ended =
      forward_only ? walk.report_eval >= 0 : walk.all_reduce_grads >= 0 && walk.optimizer_step >= 0;
  if (ended) return absl::OkStatus();
  const std::vector<Instruction>& instructions = program.stage_programs[stage].instructions;
  const std::string ends = instructions.empty()
                               ? std::string("the stage has no instructions")
                               : absl::StrCat("its last instruction is #", instructions.size() - 1,
                                              " ", ToString(instructions.back()));
  if (forward_only) {
    return absl::InvalidArgumentError(
        absl::StrCat("stage ", stage,
                     ": ReportEval is missing: every stage of a forward-only program ends with "
                     "ReportEval (",
                     ends, ")"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "stage ", stage, ": ", walk.all_reduce_grads < 0 ? "AllReduceGrads" : "OptimizerStep",
      " is missing: every stage ends with AllReduceGrads, OptimizerStep (", ends, ")"));
}

}  // namespace

absl::Status CheckStageComplete(const Program& program, int stage, const StageWalk& walk) {
  const int m_count = program.micro_batches;
  for (int c = 0; c < program.chunks; ++c) {
    const StageChunk at{stage, c};
    for (int m = 0; m < m_count; ++m) {
      const MicroBatchSteps& seen = walk.micro_batches[static_cast<size_t>(c) * m_count + m];
      for (int s = 0; s < kNumSteps; ++s) {
        const Step step = static_cast<Step>(s);
        if (seen.at(step) >= 0) continue;
        const std::string why = WhyNeeded(program, at, m, step, seen);
        if (why.empty()) continue;  // this step does not apply here
        return absl::InvalidArgumentError(absl::StrCat(
            "stage ", stage, ": ", ToString(InstructionOf(step, m, c)), " is missing: ", why));
      }
    }
  }
  RETURN_IF_ERROR(CheckSkipsComplete(program, stage, walk.micro_batches, walk.skips));
  return CheckStepEnd(program, stage, walk);
}

}  // namespace gpipe::schedule

#include "runtime/schedule/stage_checks.h"

#include <algorithm>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"

namespace gpipe::schedule {
namespace {

// The Step of each per-micro-batch instruction; none for the step-level ones.
std::optional<Step> StepOfOp(const LoadMicroBatch&) { return Step::kLoad; }
std::optional<Step> StepOfOp(const RecvActivation&) { return Step::kRecvActivation; }
std::optional<Step> StepOfOp(const Forward&) { return Step::kForward; }
std::optional<Step> StepOfOp(const SendActivation&) { return Step::kSendActivation; }
std::optional<Step> StepOfOp(const RecvGrad&) { return Step::kRecvGrad; }
std::optional<Step> StepOfOp(const Backward&) { return Step::kBackward; }
std::optional<Step> StepOfOp(const BackwardInput&) { return Step::kBackwardInput; }
std::optional<Step> StepOfOp(const BackwardWeight&) { return Step::kBackwardWeight; }
std::optional<Step> StepOfOp(const SendGrad&) { return Step::kSendGrad; }
std::optional<Step> StepOfOp(const SendSkip&) { return std::nullopt; }
std::optional<Step> StepOfOp(const RecvSkip&) { return std::nullopt; }
std::optional<Step> StepOfOp(const SendSkipGrad&) { return std::nullopt; }
std::optional<Step> StepOfOp(const RecvSkipGrad&) { return std::nullopt; }
std::optional<Step> StepOfOp(const AllReduceGrads&) { return std::nullopt; }
std::optional<Step> StepOfOp(const OptimizerStep&) { return std::nullopt; }
std::optional<Step> StepOfOp(const ReportEval&) { return std::nullopt; }

std::optional<Step> StepOf(const Instruction& instruction) {
  return std::visit([](const auto& op) { return StepOfOp(op); }, instruction);
}

// Instructions that only a training step has.
bool IsBackwardSide(const Instruction& instruction) {
  return std::holds_alternative<RecvGrad>(instruction) ||
         std::holds_alternative<Backward>(instruction) ||
         std::holds_alternative<BackwardInput>(instruction) ||
         std::holds_alternative<BackwardWeight>(instruction) ||
         std::holds_alternative<SendGrad>(instruction) ||
         std::holds_alternative<AllReduceGrads>(instruction) ||
         std::holds_alternative<OptimizerStep>(instruction);
}

std::string KindName(pb::Schedule kind) {
  return pb::Schedule_IsValid(kind) ? pb::Schedule_Name(kind)
                                    : absl::StrCat("schedule ", static_cast<int>(kind));
}

// Where an instruction may not stand whatever its micro-batch, checked before the
// per-micro-batch rules: nothing follows the step's last instruction, AllReduceGrads is
// followed only by OptimizerStep, and training and forward-only programs each hold only their
// own kinds.
absl::Status CheckPlace(const Program& program, const StageWalk& walk,
                        const Instruction& instruction) {
  if (walk.optimizer_step >= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("comes after OptimizerStep (instruction #", walk.optimizer_step,
                     "), which must be the stage's last instruction"));
  }
  if (walk.report_eval >= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("comes after ReportEval (instruction #", walk.report_eval,
                     "), which must be the stage's last instruction"));
  }
  if (program.forward_only() && IsBackwardSide(instruction)) {
    return absl::InvalidArgumentError(absl::StrCat(
        KindName(program.kind),
        " programs are forward-only: no RecvGrad, Backward, BackwardInput, BackwardWeight, "
        "SendGrad, AllReduceGrads or OptimizerStep; a stage forwards its micro-batches and ends "
        "with ReportEval"));
  }
  const bool is_report_eval = std::holds_alternative<ReportEval>(instruction);
  if (!program.forward_only() && is_report_eval) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReportEval ends forward-only (EVAL) programs; a ", KindName(program.kind),
                     " training step ends with AllReduceGrads, OptimizerStep"));
  }
  const bool is_optimizer_step = std::holds_alternative<OptimizerStep>(instruction);
  if (walk.all_reduce_grads >= 0 && !is_optimizer_step) {
    return absl::InvalidArgumentError(
        absl::StrCat("comes after AllReduceGrads (instruction #", walk.all_reduce_grads,
                     "); a stage ends with AllReduceGrads, OptimizerStep and nothing else"));
  }
  if (is_optimizer_step && walk.all_reduce_grads < 0) {
    return absl::InvalidArgumentError(
        "comes before AllReduceGrads; a stage ends with AllReduceGrads, OptimizerStep");
  }
  return absl::OkStatus();
}

// One per-micro-batch instruction being checked: where it runs, what its micro-batch has done
// on this stage so far, and the message pieces every rule uses.
struct StepCheck {
  int m;
  int chunk;
  Step step;
  const MicroBatchSteps& seen;
  bool first;  // the pipeline's first virtual stage (loads inputs)
  bool last;   // the pipeline's last virtual stage (loads targets, computes the loss)

  int done(Step s) const { return seen.at(s); }
  std::string name(Step s) const { return ToString(InstructionOf(s, m, chunk)); }
  // "micro-batch 3 <what> twice (first at instruction #8)".
  absl::Status Twice(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(
        "micro-batch ", m, " ", what, " twice (first at instruction #", done(step), ")"));
  }
};

// The rules of the backward-side steps of one micro-batch (training programs only).
absl::Status CheckBackwardStep(const StepCheck& check) {
  const int m = check.m;
  const Step step = check.step;
  const MicroBatchSteps& seen = check.seen;
  const bool first = check.first;
  const bool last = check.last;
  auto done = [&check](Step s) { return check.done(s); };
  auto name = [&check](Step s) { return check.name(s); };
  // Backward, or BackwardInput + BackwardWeight: never both for one micro-batch.
  auto mixed = [&](Step other) {
    return absl::InvalidArgumentError(absl::StrCat(
        "micro-batch ", m, " already has ", name(other), " at instruction #", done(other),
        "; a micro-batch is backwarded by Backward, or by BackwardInput then BackwardWeight, "
        "not both"));
  };
  // What Backward and BackwardInput both need: the forward and the output gradient.
  auto needs_forward_and_gradient = [&](const char* what) -> absl::Status {
    if (done(Step::kForward) < 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, " before ", name(Step::kForward),
                                                     ": micro-batch ", m,
                                                     " has not been forwarded on this stage yet"));
    }
    if (!last && done(Step::kRecvGrad) < 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, " before its output gradient: no ",
                                                     name(Step::kRecvGrad),
                                                     " earlier on this stage"));
    }
    return absl::OkStatus();
  };
  switch (step) {
    case Step::kRecvGrad:
      if (last) {
        return absl::InvalidArgumentError(
            "the last stage computes its output gradient from the loss; it receives none");
      }
      if (done(step) >= 0) {
        return check.Twice("is received a gradient for");
      }
      if (seen.input_gradient() >= 0) {
        const Step consumer = done(Step::kBackward) >= 0 ? Step::kBackward : Step::kBackwardInput;
        return absl::InvalidArgumentError(
            absl::StrCat("receives after ", name(consumer), " at instruction #", done(consumer),
                         "; the ", consumer == Step::kBackward ? "backward" : "input-gradient pass",
                         " needs this gradient"));
      }
      break;
    case Step::kBackward:
      if (done(step) >= 0) return check.Twice("is backwarded");
      if (done(Step::kBackwardInput) >= 0) return mixed(Step::kBackwardInput);
      if (done(Step::kBackwardWeight) >= 0) return mixed(Step::kBackwardWeight);
      return needs_forward_and_gradient("Backward");
    case Step::kBackwardInput:
      if (done(step) >= 0) {
        return check.Twice("has its input gradient computed");
      }
      if (done(Step::kBackward) >= 0) return mixed(Step::kBackward);
      return needs_forward_and_gradient("BackwardInput");
    case Step::kBackwardWeight:
      if (done(step) >= 0) {
        return check.Twice("has its weight gradients accumulated");
      }
      if (done(Step::kBackward) >= 0) return mixed(Step::kBackward);
      if (done(Step::kBackwardInput) < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "BackwardWeight before ", name(Step::kBackwardInput),
            ": the weight gradients are what the input-gradient pass deferred; run it first"));
      }
      break;
    case Step::kSendGrad:
      if (first) {
        return absl::InvalidArgumentError(
            "the first stage has no previous stage to send gradients to");
      }
      if (done(step) >= 0) return check.Twice("is sent back");
      if (seen.input_gradient() < 0) {
        return absl::InvalidArgumentError(absl::StrCat("sends before ", name(Step::kBackward),
                                                       " (or ", name(Step::kBackwardInput),
                                                       ") has produced the gradient"));
      }
      break;
    case Step::kLoad:
    case Step::kRecvActivation:
    case Step::kForward:
    case Step::kSendActivation:
      break;  // forward-side steps: CheckStep
  }
  return absl::OkStatus();
}

// Checks one per-micro-batch instruction against what the stage has done so far.
absl::Status CheckStep(const Program& program, StageChunk at, int m, Step step,
                       const MicroBatchSteps& seen) {
  const Topology topology = program.topology();
  const StepCheck check{.m = m,
                        .chunk = at.chunk,
                        .step = step,
                        .seen = seen,
                        .first = topology.IsFirst(at),
                        .last = topology.IsLast(at)};
  const bool first = check.first;
  const bool last = check.last;
  auto done = [&check](Step s) { return check.done(s); };
  auto name = [&check](Step s) { return check.name(s); };
  switch (step) {
    case Step::kLoad:
      if (!first && !last) {
        return absl::InvalidArgumentError(
            "only the first stage (inputs) and the last stage (targets) load micro-batches");
      }
      if (done(Step::kLoad) >= 0) return check.Twice("is loaded");
      if (done(Step::kForward) >= 0) {
        return absl::InvalidArgumentError(absl::StrCat("loads after ", name(Step::kForward),
                                                       " at instruction #", done(Step::kForward),
                                                       "; load before forwarding"));
      }
      break;
    case Step::kRecvActivation:
      if (first) {
        return absl::InvalidArgumentError(
            "the first stage has no previous stage to receive activations from");
      }
      if (done(step) >= 0) return check.Twice("is received");
      if (done(Step::kForward) >= 0) {
        return absl::InvalidArgumentError(absl::StrCat("receives after ", name(Step::kForward),
                                                       " at instruction #", done(Step::kForward),
                                                       "; the forward needs this input"));
      }
      break;
    case Step::kForward:
      if (done(step) >= 0) return check.Twice("is forwarded");
      if (first && done(Step::kLoad) < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Forward before its input: no ", name(Step::kLoad), " earlier on this stage"));
      }
      if (!first && done(Step::kRecvActivation) < 0) {
        return absl::InvalidArgumentError(absl::StrCat("Forward before its input: no ",
                                                       name(Step::kRecvActivation),
                                                       " earlier on this stage"));
      }
      if (last && !first && done(Step::kLoad) < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("Forward before its targets: the last stage must ", name(Step::kLoad),
                         " before forwarding (it computes the loss)"));
      }
      break;
    case Step::kSendActivation:
      if (last) {
        return absl::InvalidArgumentError(
            "the last stage has no next stage to send activations to");
      }
      if (done(step) >= 0) return check.Twice("is sent forward");
      if (done(Step::kForward) < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("sends before ", name(Step::kForward), " has produced the activation"));
      }
      break;
    case Step::kRecvGrad:
    case Step::kBackward:
    case Step::kBackwardInput:
    case Step::kBackwardWeight:
    case Step::kSendGrad:
      return CheckBackwardStep(check);
  }
  return absl::OkStatus();
}

}  // namespace

Instruction InstructionOf(Step step, int m, int c) {
  switch (step) {
    case Step::kLoad:
      return LoadMicroBatch{m, c};
    case Step::kRecvActivation:
      return RecvActivation{m, c};
    case Step::kForward:
      return Forward{m, c};
    case Step::kSendActivation:
      return SendActivation{m, c};
    case Step::kRecvGrad:
      return RecvGrad{m, c};
    case Step::kBackward:
      return Backward{m, c};
    case Step::kBackwardInput:
      return BackwardInput{m, c};
    case Step::kBackwardWeight:
      return BackwardWeight{m, c};
    case Step::kSendGrad:
      return SendGrad{m, c};
  }
  return Forward{m, c};
}

absl::StatusOr<StageWalk> WalkStage(const Program& program, int stage) {
  const int m_count = program.micro_batches;
  const std::vector<Instruction>& instructions = program.stage_programs[stage].instructions;
  StageWalk walk;
  walk.micro_batches.resize(static_cast<size_t>(program.chunks) * m_count);
  int live = 0;
  for (int i = 0; i < static_cast<int>(instructions.size()); ++i) {
    const Instruction& instruction = instructions[i];
    auto fail = [&](const absl::Status& status) {
      return absl::InvalidArgumentError(
          absl::StrCat(DescribeInstruction(program, stage, i), ": ", status.message()));
    };
    if (absl::Status status = CheckPlace(program, walk, instruction); !status.ok()) {
      return fail(status);
    }
    const std::optional<Step> step = StepOf(instruction);
    const bool is_skip = SkipLayerOf(instruction).has_value();
    if (!step &&
        !is_skip) {  // AllReduceGrads, OptimizerStep or ReportEval, where CheckPlace allows
      if (std::holds_alternative<AllReduceGrads>(instruction)) walk.all_reduce_grads = i;
      if (std::holds_alternative<OptimizerStep>(instruction)) walk.optimizer_step = i;
      if (std::holds_alternative<ReportEval>(instruction)) walk.report_eval = i;
      continue;
    }

    const int m = *MicroBatchOf(instruction);
    const int c = ChunkOf(instruction);
    if (m < 0 || m >= m_count) {
      return fail(absl::InvalidArgumentError(
          absl::StrCat("micro-batch ", m, " is out of range: the program has ", m_count,
                       " micro-batches (0..", m_count - 1, ")")));
    }
    if (c < 0 || c >= program.chunks) {
      return fail(absl::InvalidArgumentError(
          absl::StrCat("chunk ", c, " is out of range: the program has ", program.chunks,
                       " chunk(s) per stage (0..", program.chunks - 1, ")")));
    }
    if (is_skip) {
      const absl::Status status =
          NoteSkipInstruction(program, stage, i, instruction, walk.micro_batches, walk.skips);
      if (!status.ok()) return fail(status);
      continue;
    }
    MicroBatchSteps& seen = walk.micro_batches[static_cast<size_t>(c) * m_count + m];
    const absl::Status status = CheckStep(program, {stage, c}, m, *step, seen);
    if (!status.ok()) return fail(status);
    seen.at(*step) = i;
    // Activations are kept from the forward until the backward is complete: Backward, or the
    // BackwardWeight that ends a split one. A forward-only program keeps none.
    if (*step == Step::kForward && !program.forward_only()) {
      walk.peak_live_activations = std::max(walk.peak_live_activations, ++live);
    }
    if (*step == Step::kBackward || *step == Step::kBackwardWeight) --live;
  }
  return walk;
}

}  // namespace gpipe::schedule

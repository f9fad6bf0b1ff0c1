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
std::optional<Step> StepOfOp(const SendGrad&) { return Step::kSendGrad; }
std::optional<Step> StepOfOp(const AllReduceGrads&) { return std::nullopt; }
std::optional<Step> StepOfOp(const OptimizerStep&) { return std::nullopt; }

std::optional<Step> StepOf(const Instruction& instruction) {
  return std::visit([](const auto& op) { return StepOfOp(op); }, instruction);
}

Instruction MakeInstruction(Step step, int m, int c) {
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
    case Step::kSendGrad:
      return SendGrad{m, c};
  }
  return Forward{m, c};
}

// Checks one per-micro-batch instruction against what the stage has done so far.
absl::Status CheckStep(const Program& program, StageChunk at, int m, Step step,
                       const MicroBatchSteps& seen) {
  const Topology topology = program.topology();
  const bool first = topology.IsFirst(at);
  const bool last = topology.IsLast(at);
  const int c = at.chunk;
  auto done = [&](Step s) { return seen.at(s); };
  auto name = [&](Step s) { return ToString(MakeInstruction(s, m, c)); };
  auto twice = [&](const char* what) {
    return absl::InvalidArgumentError(absl::StrCat(
        "micro-batch ", m, " is ", what, " twice (first at instruction #", done(step), ")"));
  };
  switch (step) {
    case Step::kLoad:
      if (!first && !last) {
        return absl::InvalidArgumentError(
            "only the first stage (inputs) and the last stage (targets) load micro-batches");
      }
      if (done(Step::kLoad) >= 0) return twice("loaded");
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
      if (done(step) >= 0) return twice("received");
      if (done(Step::kForward) >= 0) {
        return absl::InvalidArgumentError(absl::StrCat("receives after ", name(Step::kForward),
                                                       " at instruction #", done(Step::kForward),
                                                       "; the forward needs this input"));
      }
      break;
    case Step::kForward:
      if (done(step) >= 0) return twice("forwarded");
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
      if (done(step) >= 0) return twice("sent forward");
      if (done(Step::kForward) < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("sends before ", name(Step::kForward), " has produced the activation"));
      }
      break;
    case Step::kRecvGrad:
      if (last) {
        return absl::InvalidArgumentError(
            "the last stage computes its output gradient from the loss; it receives none");
      }
      if (done(step) >= 0) return twice("received a gradient for");
      if (done(Step::kBackward) >= 0) {
        return absl::InvalidArgumentError(absl::StrCat("receives after ", name(Step::kBackward),
                                                       " at instruction #", done(Step::kBackward),
                                                       "; the backward needs this gradient"));
      }
      break;
    case Step::kBackward:
      if (done(step) >= 0) return twice("backwarded");
      if (done(Step::kForward) < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("Backward before ", name(Step::kForward), ": micro-batch ", m,
                         " has not been forwarded on this stage yet"));
      }
      if (!last && done(Step::kRecvGrad) < 0) {
        return absl::InvalidArgumentError(absl::StrCat("Backward before its output gradient: no ",
                                                       name(Step::kRecvGrad),
                                                       " earlier on this stage"));
      }
      break;
    case Step::kSendGrad:
      if (first) {
        return absl::InvalidArgumentError(
            "the first stage has no previous stage to send gradients to");
      }
      if (done(step) >= 0) return twice("sent back");
      if (done(Step::kBackward) < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("sends before ", name(Step::kBackward), " has produced the gradient"));
      }
      break;
  }
  return absl::OkStatus();
}

}  // namespace

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
    if (walk.optimizer_step >= 0) {
      return fail(absl::InvalidArgumentError(
          absl::StrCat("comes after OptimizerStep (instruction #", walk.optimizer_step,
                       "), which must be the stage's last instruction")));
    }
    const bool is_optimizer_step = std::holds_alternative<OptimizerStep>(instruction);
    if (walk.all_reduce_grads >= 0 && !is_optimizer_step) {
      return fail(absl::InvalidArgumentError(
          absl::StrCat("comes after AllReduceGrads (instruction #", walk.all_reduce_grads,
                       "); a stage ends with AllReduceGrads, OptimizerStep and nothing else")));
    }
    const std::optional<Step> step = StepOf(instruction);
    if (!step) {  // AllReduceGrads or OptimizerStep
      if (is_optimizer_step && walk.all_reduce_grads < 0) {
        return fail(absl::InvalidArgumentError(
            "comes before AllReduceGrads; a stage ends with AllReduceGrads, OptimizerStep"));
      }
      (is_optimizer_step ? walk.optimizer_step : walk.all_reduce_grads) = i;
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
    MicroBatchSteps& seen = walk.micro_batches[static_cast<size_t>(c) * m_count + m];
    const absl::Status status = CheckStep(program, {stage, c}, m, *step, seen);
    if (!status.ok()) return fail(status);
    seen.at(*step) = i;
    if (*step == Step::kForward) {
      walk.peak_live_activations = std::max(walk.peak_live_activations, ++live);
    }
    if (*step == Step::kBackward) --live;
  }
  return walk;
}

absl::Status CheckStageComplete(const Program& program, int stage, const StageWalk& walk) {
  const Topology topology = program.topology();
  const int m_count = program.micro_batches;
  for (int c = 0; c < program.chunks; ++c) {
    const StageChunk at{stage, c};
    const bool first = topology.IsFirst(at);
    const bool last = topology.IsLast(at);
    for (int m = 0; m < m_count; ++m) {
      const MicroBatchSteps& seen = walk.micro_batches[static_cast<size_t>(c) * m_count + m];
      for (int s = 0; s < kNumSteps; ++s) {
        const Step step = static_cast<Step>(s);
        if (seen.at(step) >= 0) continue;
        std::string why;
        switch (step) {
          case Step::kLoad:
            if (first) why = "the first stage loads every micro-batch's inputs";
            if (last)
              why = first ? "a single stage loads every micro-batch's inputs and targets"
                          : "the last stage loads every micro-batch's targets";
            break;
          case Step::kRecvActivation:
            if (!first)
              why = absl::StrCat("the input of micro-batch ", m, " comes from stage ",
                                 topology.Previous(at).stage);
            break;
          case Step::kForward:
            why = "every micro-batch is forwarded once on every stage";
            break;
          case Step::kSendActivation:
            if (!last)
              why = absl::StrCat("micro-batch ", m, " is forwarded at instruction #",
                                 seen.at(Step::kForward), " but never sent to stage ",
                                 topology.Next(at).stage);
            break;
          case Step::kRecvGrad:
            if (!last)
              why = absl::StrCat("the output gradient of micro-batch ", m, " comes from stage ",
                                 topology.Next(at).stage);
            break;
          case Step::kBackward:
            why = "every micro-batch is backwarded once on every stage";
            break;
          case Step::kSendGrad:
            if (!first)
              why = absl::StrCat(
                  "micro-batch ", m, " is backwarded at instruction #", seen.at(Step::kBackward),
                  " but its gradient is never sent to stage ", topology.Previous(at).stage);
            break;
        }
        if (why.empty()) continue;  // this step does not apply at this position
        return absl::InvalidArgumentError(absl::StrCat(
            "stage ", stage, ": ", ToString(MakeInstruction(step, m, c)), " is missing: ", why));
      }
    }
  }
  if (walk.all_reduce_grads < 0 || walk.optimizer_step < 0) {
    const std::vector<Instruction>& instructions = program.stage_programs[stage].instructions;
    const std::string ends =
        instructions.empty() ? std::string("the stage has no instructions")
                             : absl::StrCat("its last instruction is #", instructions.size() - 1,
                                            " ", ToString(instructions.back()));
    return absl::InvalidArgumentError(absl::StrCat(
        "stage ", stage, ": ", walk.all_reduce_grads < 0 ? "AllReduceGrads" : "OptimizerStep",
        " is missing: every stage ends with AllReduceGrads, OptimizerStep (", ends, ")"));
  }
  return absl::OkStatus();
}

}  // namespace gpipe::schedule

// Single-stage checks of a Program, used by the verifier (verifier.h) before it pairs the
// stages' transfers and simulates them. WalkStage reads one stage's list in order and fails at
// the first instruction that is out of range, on the wrong stage, duplicated, out of order, or
// of a kind the program may not hold (backward-side work in a forward-only EVAL program,
// ReportEval in a training one); CheckStageComplete then reports what the stage never does.
// Errors are INVALID_ARGUMENT and name the stage, the instruction index and the instruction.
#ifndef GPIPE_RUNTIME_SCHEDULE_STAGE_CHECKS_H_
#define GPIPE_RUNTIME_SCHEDULE_STAGE_CHECKS_H_

#include <array>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/schedule/program.h"
#include "runtime/schedule/skip_checks.h"

namespace gpipe::schedule {

// The per-micro-batch instructions, in the order a stage needs them. A micro-batch is
// backwarded either by kBackward or by kBackwardInput followed by kBackwardWeight.
enum class Step {
  kLoad,  // LoadMicroBatch: inputs on the first stage, targets on the last
  kRecvActivation,
  kForward,
  kSendActivation,
  kRecvGrad,
  kBackward,
  kBackwardInput,
  kBackwardWeight,
  kSendGrad,
};
inline constexpr int kNumSteps = 9;

// The instruction of `step` for micro-batch m, chunk c.
Instruction InstructionOf(Step step, int m, int c);

// Where each step of one (chunk, micro-batch) sits in the stage's list; -1 = not seen.
struct MicroBatchSteps {
  std::array<int, kNumSteps> index;
  MicroBatchSteps() { index.fill(-1); }
  int& at(Step step) { return index[static_cast<int>(step)]; }
  int at(Step step) const { return index[static_cast<int>(step)]; }
  // The instruction that produced the input gradient: Backward or BackwardInput; -1 if none.
  int input_gradient() const {
    return at(Step::kBackward) >= 0 ? at(Step::kBackward) : at(Step::kBackwardInput);
  }
};

struct StageWalk {
  std::vector<MicroBatchSteps> micro_batches;  // index = chunk * M + micro-batch
  int all_reduce_grads = -1;
  int optimizer_step = -1;
  int report_eval = -1;
  // Most micro-batches (over all chunks) forwarded whose backward is not complete (no
  // Backward, or no BackwardWeight after BackwardInput) at any point. 0 in forward-only
  // programs: nothing is kept for a backward there.
  int peak_live_activations = 0;
  SkipSteps skips;  // the skip-connection transfers (skip_checks.h)
};

// Precondition: program.stages, micro_batches, chunks >= 1 and stage_programs.size() == stages.
absl::StatusOr<StageWalk> WalkStage(const Program& program, int stage);

// Every (chunk, micro-batch) of the stage is loaded/received, forwarded, sent, and (training)
// received back, backwarded and sent back as its position in the pipeline requires, and the
// stage ends with AllReduceGrads, OptimizerStep (training) or ReportEval (forward-only).
absl::Status CheckStageComplete(const Program& program, int stage, const StageWalk& walk);

}  // namespace gpipe::schedule

#endif  // GPIPE_RUNTIME_SCHEDULE_STAGE_CHECKS_H_

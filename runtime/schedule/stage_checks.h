// Single-stage checks of a Program, used by the verifier (verifier.h) before it pairs the
// stages' transfers and simulates them. WalkStage reads one stage's list in order and fails at
// the first instruction that is out of range, on the wrong stage, duplicated or out of order;
// CheckStageComplete then reports what the stage never does. Errors are INVALID_ARGUMENT and
// name the stage, the instruction index and the instruction.
#ifndef GPIPE_RUNTIME_SCHEDULE_STAGE_CHECKS_H_
#define GPIPE_RUNTIME_SCHEDULE_STAGE_CHECKS_H_

#include <array>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/schedule/program.h"

namespace gpipe::schedule {

// The per-micro-batch instructions, in the order a stage needs them.
enum class Step {
  kLoad,  // LoadMicroBatch: inputs on the first stage, targets on the last
  kRecvActivation,
  kForward,
  kSendActivation,
  kRecvGrad,
  kBackward,
  kSendGrad,
};
inline constexpr int kNumSteps = 7;

// Where each step of one (chunk, micro-batch) sits in the stage's list; -1 = not seen.
struct MicroBatchSteps {
  std::array<int, kNumSteps> index;
  MicroBatchSteps() { index.fill(-1); }
  int& at(Step step) { return index[static_cast<int>(step)]; }
  int at(Step step) const { return index[static_cast<int>(step)]; }
};

struct StageWalk {
  std::vector<MicroBatchSteps> micro_batches;  // index = chunk * M + micro-batch
  int all_reduce_grads = -1;
  int optimizer_step = -1;
  // Most micro-batches (over all chunks) forwarded but not yet backwarded at any point.
  int peak_live_activations = 0;
};

// Precondition: program.stages, micro_batches, chunks >= 1 and stage_programs.size() == stages.
absl::StatusOr<StageWalk> WalkStage(const Program& program, int stage);

// Every (chunk, micro-batch) of the stage is loaded/received, forwarded, sent, received back,
// backwarded and sent back as its position in the pipeline requires, and the stage ends with
// AllReduceGrads, OptimizerStep.
absl::Status CheckStageComplete(const Program& program, int stage, const StageWalk& walk);

}  // namespace gpipe::schedule

#endif  // GPIPE_RUNTIME_SCHEDULE_STAGE_CHECKS_H_

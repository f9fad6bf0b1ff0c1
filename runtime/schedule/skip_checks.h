// Stage checks of the skip-connection transfers (Program::skips), used by WalkStage and
// CheckStageComplete (stage_checks.h). For every route and micro-batch the producer's stage sends
// the output after its Forward and, training, receives the gradient before its input-gradient
// pass (Backward or BackwardInput); the join's stage receives the output before its Forward and,
// training, sends the gradient after its input-gradient pass; each exactly once. Errors are
// INVALID_ARGUMENT; the caller names the stage and instruction.
#ifndef GPIPE_RUNTIME_SCHEDULE_SKIP_CHECKS_H_
#define GPIPE_RUNTIME_SCHEDULE_SKIP_CHECKS_H_

#include <map>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "runtime/schedule/program.h"

namespace gpipe::schedule {

struct MicroBatchSteps;

// Where each skip instruction of one stage sits: (kind, join layer, chunk, micro-batch) ->
// instruction index. kind: 0 SendSkip, 1 RecvSkip, 2 SendSkipGrad, 3 RecvSkipGrad.
struct SkipSteps {
  std::map<std::tuple<int, int, int, int>, int> index;
};

// Checks the skip instruction at `index` of `stage` against its route and what its micro-batch
// has done on the stage so far (`seen`: the stage's MicroBatchSteps by chunk * M + micro-batch),
// and records it. Precondition: its micro-batch and chunk are in range.
absl::Status NoteSkipInstruction(const Program& program, int stage, int index,
                                 const Instruction& instruction,
                                 const std::vector<MicroBatchSteps>& seen, SkipSteps& steps);

// Every skip transfer the routes give the stage is there (in a forward-only program, only the
// forward ones). The message names the instruction that needs the missing one.
absl::Status CheckSkipsComplete(const Program& program, int stage,
                                const std::vector<MicroBatchSteps>& seen, const SkipSteps& steps);

}  // namespace gpipe::schedule

#endif  // GPIPE_RUNTIME_SCHEDULE_SKIP_CHECKS_H_

// gpipe/callbacks.h — what a program is told while its runtime trains.
//
// Contract: every callback is optional and runs on rank 0 only, on the thread that called the
// runtime, between steps (the other ranks wait at their next command meanwhile, within
// runtime.timeouts.wait_seconds: keep callbacks short). A callback must not call back into the
// runtime. Exceptions must not escape a callback.
#ifndef GPIPE_CALLBACKS_H_
#define GPIPE_CALLBACKS_H_

#include <functional>

#include "gpipe/metrics.h"

namespace gpipe {

enum class StepAction {
  kContinue,
  // End training after this step on every rank, as a stop signal does: a checkpoint is saved
  // when the plan has checkpoint.dir, and Train returns with `stopped` set.
  kStop,
};

struct Callbacks {
  std::function<StepAction(const StepMetrics&)> on_step;
  std::function<void(const EvalMetrics&)> on_evaluation;
  std::function<void(const CheckpointInfo&)> on_checkpoint;
};

}  // namespace gpipe

#endif  // GPIPE_CALLBACKS_H_

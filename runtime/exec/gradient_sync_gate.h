// GradientSyncGate: the per-step barrier between a stage and the coordinator. The executor
// calls it once per step, at OptimizerStep, after all of the step's transfers completed; it
// returns rank 0's decision for every rank alike: apply the optimizer step (with the gradients
// scaled by grad_scale: gradient clipping), or skip it.
#ifndef GPIPE_RUNTIME_EXEC_GRADIENT_SYNC_GATE_H_
#define GPIPE_RUNTIME_EXEC_GRADIENT_SYNC_GATE_H_

#include "absl/status/statusor.h"
#include "proto/control.pb.h"

namespace gpipe {

class GradientSyncGate {
 public:
  virtual ~GradientSyncGate() = default;
  // Delivers this stage's report and returns rank 0's decision (apply, grad_scale, stop).
  virtual absl::StatusOr<pb::StepDecision> Synchronize(const pb::StepReport& report) = 0;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_EXEC_GRADIENT_SYNC_GATE_H_

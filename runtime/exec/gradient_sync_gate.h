// GradientSyncGate: the per-step barrier between a stage and the coordinator. The executor
// calls it once per step, at OptimizerStep, after all of the step's transfers completed; it
// returns rank 0's decision for every rank alike: apply the optimizer step, or skip it.
#ifndef GPIPE_RUNTIME_EXEC_GRADIENT_SYNC_GATE_H_
#define GPIPE_RUNTIME_EXEC_GRADIENT_SYNC_GATE_H_

#include "absl/status/statusor.h"
#include "proto/control.pb.h"

namespace gpipe {

class GradientSyncGate {
 public:
  virtual ~GradientSyncGate() = default;
  // Delivers this stage's report and returns whether to apply the update.
  virtual absl::StatusOr<bool> Synchronize(const pb::StepReport& report) = 0;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_EXEC_GRADIENT_SYNC_GATE_H_

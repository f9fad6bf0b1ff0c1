// StageUpdate: a training step's optimizer step on one stage, in two halves around the
// coordinator's apply/skip decision (GradientSyncGate):
//   Prepare  waits for the previous update's all-gather (training.shard_optimizer_state), sums
//            the tied parameters' gradients, raises the non-finite flag for any gradient this
//            replica updates, and under training.clip_grad_norm adds the stage's squared-gradient
//            sums to the report;
//   Apply    on "apply" scales the gradients by the decision's grad_scale and steps each chunk's
//            optimizer; zeroes the gradients either way; under sharding starts the all-gather of
//            the parts this replica updated (the next forwards wait for it, layer by layer).
// The compute it issues is counted in `busy`. Single-threaded; lives for one step.
#ifndef GPIPE_RUNTIME_EXEC_STAGE_UPDATE_H_
#define GPIPE_RUNTIME_EXEC_STAGE_UPDATE_H_

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/control.pb.h"
#include "runtime/core/tensor.h"
#include "runtime/exec/device_busy_time.h"
#include "runtime/exec/executor_config.h"

namespace gpipe {

class StageUpdate {
 public:
  // All references must outlive the object.
  StageUpdate(const ExecutorConfig& config, ExecutorResources& res, DeviceBusyTime& busy)
      : config_(config), res_(res), busy_(busy) {}

  // `non_finite_flag`: the step's device flag (f32 [1]) that the report reads.
  absl::Status Prepare(absl::Time deadline, Tensor& non_finite_flag, pb::StepReport& report);
  // `lr`: the step command's learning rate.
  absl::Status Apply(const pb::StepDecision& decision, double lr);

 private:
  const ExecutorConfig& config_;
  ExecutorResources& res_;
  DeviceBusyTime& busy_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_EXEC_STAGE_UPDATE_H_

// StepReportBuilder: the numbers a stage reports to the coordinator at the end of a step. The
// loss (and correct predictions) and the non-finite check accumulate on the device, in scalars
// zeroed when first used in the step; Fill reads them to the host once, with the step's
// timings and memory peaks. Single-threaded; lives for one step.
#ifndef GPIPE_RUNTIME_EXEC_STEP_REPORT_BUILDER_H_
#define GPIPE_RUNTIME_EXEC_STEP_REPORT_BUILDER_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/control.pb.h"
#include "runtime/core/tensor.h"
#include "runtime/device/device.h"
#include "runtime/exec/step_scope.h"

namespace gpipe {

// The device scalars of a stage's step reports, created on first use; destroy before the device.
// Under runtime.cuda.graphs the executor keeps them from step to step (each step zeroes what it
// uses), so work captured in one step and replayed in the next adds into the same memory.
struct StepScalars {
  Tensor loss_totals;
  Tensor non_finite_flag;
};

class StepReportBuilder {
 public:
  StepReportBuilder(const StepScope& scope, Device& device, StepScalars& scalars)
      : scope_(scope), device_(device), scalars_(scalars) {}

  // The loss totals (f64 [kLossTotalsSize], see runtime/device/ops/loss_ops.h), zeroed on
  // first use in the step.
  absl::StatusOr<Tensor*> LossTotals() {
    return Scalar(scalars_.loss_totals, loss_used_, DType::kF64, 2);
  }
  // The non-finite flag (f32 [1]), zeroed on first use in the step.
  absl::StatusOr<Tensor*> NonFiniteFlag() {
    return Scalar(scalars_.non_finite_flag, flag_used_, DType::kF32, 1);
  }
  // Evaluation: real samples evaluated and predictions counted (classification).
  void CountEvaluated(int64_t samples, int64_t predictions) {
    eval_samples_ += samples;
    eval_predictions_ += predictions;
  }

  struct StageFacts {
    bool last_stage = false;
    bool forward_only = false;
    bool counts_correct = false;  // the loss counts correct predictions
    absl::Duration step_time;
    absl::Duration busy;
  };
  // Fills `report` (rank, stage, step, loss or evaluation sums, non-finite, timings, memory).
  absl::Status Fill(const StageFacts& facts, pb::StepReport& report);

 private:
  absl::StatusOr<Tensor*> Scalar(Tensor& scalar, bool& used, DType dtype, int64_t elements);

  const StepScope& scope_;
  Device& device_;
  StepScalars& scalars_;
  bool loss_used_ = false;  // this step
  bool flag_used_ = false;
  int64_t eval_samples_ = 0;
  int64_t eval_predictions_ = 0;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_EXEC_STEP_REPORT_BUILDER_H_

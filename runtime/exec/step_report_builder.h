// StepReportBuilder: the numbers a stage reports to the coordinator at the end of a step. The
// loss (and correct predictions) and the non-finite check accumulate on the device, in scalars
// created when first used in the step; Fill reads them to the host once, with the step's
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

class StepReportBuilder {
 public:
  StepReportBuilder(const StepScope& scope, Device& device) : scope_(scope), device_(device) {}

  // The loss totals (f64 [kLossTotalsSize], see runtime/device/ops/loss_ops.h), zeroed on
  // first use.
  absl::StatusOr<Tensor*> LossTotals() { return Scalar(loss_totals_, DType::kF64, 2); }
  // The non-finite flag (f32 [1]), zeroed on first use.
  absl::StatusOr<Tensor*> NonFiniteFlag() { return Scalar(non_finite_flag_, DType::kF32, 1); }
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
  absl::StatusOr<Tensor*> Scalar(Tensor& scalar, DType dtype, int64_t elements);

  const StepScope& scope_;
  Device& device_;
  Tensor loss_totals_;
  Tensor non_finite_flag_;
  int64_t eval_samples_ = 0;
  int64_t eval_predictions_ = 0;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_EXEC_STEP_REPORT_BUILDER_H_

#include "runtime/exec/step_report_builder.h"

#include <array>
#include <cmath>

#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"

namespace gpipe {
namespace {

// The memory kinds the step report breaks peaks down by.
constexpr MemoryKind kReportedKinds[] = {MemoryKind::kBoundary,     MemoryKind::kActivation,
                                         MemoryKind::kBoundaryGrad, MemoryKind::kGradient,
                                         MemoryKind::kParameter,    MemoryKind::kOptimizerState,
                                         MemoryKind::kData};

double Milliseconds(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

}  // namespace

absl::StatusOr<Tensor*> StepReportBuilder::Scalar(Tensor& scalar, bool& used, DType dtype,
                                                  int64_t elements) {
  if (!used) {
    if (!scalar.defined()) {
      ASSIGN_OR_RETURN(scalar,
                       Tensor::Empty(device_, Shape{elements}, dtype, MemoryKind::kWorkspace));
    }
    RETURN_IF_ERROR(device_.ops().tensor.Fill(scalar, 0.0));
    used = true;
  }
  return &scalar;
}

absl::Status StepReportBuilder::Fill(const StageFacts& facts, pb::StepReport& report) {
  const ExecutorConfig& config = scope_.config();
  report.set_rank(config.rank);
  report.set_stage(config.stage);
  report.set_step(scope_.command().step());
  bool non_finite = false;
  if (flag_used_) {
    float flag = 0.0f;
    RETURN_IF_ERROR(device_.CopyToHost(scalars_.non_finite_flag, &flag, sizeof(flag)));
    non_finite = flag != 0.0f;
  }
  if (facts.last_stage) {
    std::array<double, kLossTotalsSize> totals{};
    if (loss_used_) {
      RETURN_IF_ERROR(device_.CopyToHost(scalars_.loss_totals, totals.data(), sizeof(totals)));
    }
    if (!std::isfinite(totals[kLossSum])) non_finite = true;
    if (facts.counts_correct) report.set_correct(static_cast<int64_t>(totals[kLossCorrect]));
    if (facts.forward_only) {
      report.set_eval_loss_sum(totals[kLossSum]);
      report.set_eval_samples(eval_samples_);
      report.set_eval_predictions(eval_predictions_);
    } else {
      report.set_loss(totals[kLossSum]);
    }
  }
  report.set_non_finite(non_finite);
  report.set_step_ms(Milliseconds(facts.step_time));
  report.set_busy_ms(Milliseconds(facts.busy));
  const MemoryTracker& memory = device_.memory();
  report.set_peak_bytes(memory.peak());
  report.set_current_bytes(memory.current());
  for (MemoryKind kind : kReportedKinds) {
    (*report.mutable_peak_bytes_by_kind())[MemoryKindName(kind)] = memory.peak(kind);
  }
  return absl::OkStatus();
}

}  // namespace gpipe

#include "runtime/coord/coordinator_gate.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/exec/gradient_norm_terms.h"

namespace gpipe {

absl::StatusOr<pb::StepDecision> CoordinatorGate::Synchronize(const pb::StepReport& report) {
  pb::StepReport mine = report;
  if (stop_requested_ != nullptr && stop_requested_()) mine.set_stop_requested(true);
  ASSIGN_OR_RETURN(std::vector<std::string> gathered,
                   control_.GatherToRoot(mine, absl::Now() + timeout_, kControlTagStepReport));
  pb::StepDecision decision;
  if (control_.rank() == 0) {
    reports_.assign(gathered.size(), pb::StepReport());
    bool apply = true;
    bool stop = false;
    for (size_t r = 0; r < gathered.size(); ++r) {
      if (!reports_[r].ParseFromString(gathered[r])) {
        return absl::DataLossError(absl::StrCat("unreadable step report from rank ", r));
      }
      if (reports_[r].non_finite()) apply = false;
      if (reports_[r].stop_requested()) stop = true;
    }
    decision.set_step(report.step());
    decision.set_apply(apply);
    decision.set_stop(stop);
    grad_norm_ = -1;
    if (apply && clip_grad_norm_ > 0) {
      // torch.nn.utils.clip_grad_norm_: scale by C / (norm + 1e-6) when that is below 1.
      grad_norm_ = GlobalGradientNorm(reports_, sharded_gradients_);
      const double scale = clip_grad_norm_ / (grad_norm_ + 1e-6);
      if (scale < 1) decision.set_grad_scale(scale);
    }
  }
  RETURN_IF_ERROR(control_.Broadcast(decision, absl::Now() + timeout_, kControlTagDecision));
  if (decision.step() != report.step()) {
    return absl::InternalError(absl::StrCat("decision for step ", decision.step(),
                                            " arrived during step ", report.step()));
  }
  applied_ = decision.apply();
  stop_ = decision.stop();
  return decision;
}

}  // namespace gpipe

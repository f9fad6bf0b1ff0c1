#include "runtime/coord/coordinator_gate.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"

namespace gpipe {

absl::StatusOr<bool> CoordinatorGate::Synchronize(const pb::StepReport& report) {
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
  }
  RETURN_IF_ERROR(control_.Broadcast(decision, absl::Now() + timeout_, kControlTagDecision));
  if (decision.step() != report.step()) {
    return absl::InternalError(absl::StrCat("decision for step ", decision.step(),
                                            " arrived during step ", report.step()));
  }
  applied_ = decision.apply();
  stop_ = decision.stop();
  return decision.apply();
}

}  // namespace gpipe

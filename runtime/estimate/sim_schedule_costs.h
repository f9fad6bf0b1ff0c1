// SimScheduleCosts: the schedule verifier's op costs for a plan that runs on the simulated
// device (runtime { device: SIM }), in milliseconds, from the cost table the SIM runtime itself
// uses (SimCosts over runtime.sim), so `gpipe-plan show` predicts the step time a SIM run
// should take: the schedule's ideal makespan.
//   forward          the part's layers' forward times (plus runtime.sim.loss_us on the last part)
//   backward_input   per layer: backward_input when the layer splits its backward, else
//                    backward_input + backward_weight (it runs whole in the input half)
//   backward_weight  per layer that splits: backward_weight
//   send             the link time of the largest boundary tensor
// The optimizer update (runtime.sim.optimizer_us) is not part of the schedule.
#ifndef GPIPE_RUNTIME_ESTIMATE_SIM_SCHEDULE_COSTS_H_
#define GPIPE_RUNTIME_ESTIMATE_SIM_SCHEDULE_COSTS_H_

#include "absl/status/statusor.h"
#include "runtime/plan/analyzed_plan.h"
#include "runtime/schedule/verifier.h"

namespace gpipe {

absl::StatusOr<schedule::OpCosts> SimScheduleCosts(const AnalyzedPlan& plan);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_ESTIMATE_SIM_SCHEDULE_COSTS_H_

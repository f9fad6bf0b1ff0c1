// CostsFromFlops: the schedule verifier's op costs of an analyzed plan from its parts' FLOPs, in
// units of a mean stage's forward. Rank 0 verifies its schedule with them and `gpipe-plan show`
// times devices other than SIM with them (SIM takes runtime.sim's costs: sim_schedule_costs.h).
#ifndef GPIPE_RUNTIME_ESTIMATE_FLOP_COSTS_H_
#define GPIPE_RUNTIME_ESTIMATE_FLOP_COSTS_H_

#include "runtime/plan/analyzed_plan.h"
#include "runtime/schedule/verifier.h"

namespace gpipe {

// Verifier costs from each part's FLOPs, normalized so a mean stage's forward costs 1:
// forward = FLOPs/3, backward = 2 FLOPs/3, of which the weight-gradient half is the share of
// the layers that split their backward (1 forward's worth when every layer does).
schedule::OpCosts CostsFromFlops(const AnalyzedPlan& plan);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_ESTIMATE_FLOP_COSTS_H_

// The fields in which two resolved plans differ, field by field, for the lines a resumed run
// prints ("pipeline.stages 2 (checkpoint: 4)").
#ifndef GPIPE_RUNTIME_PLAN_PLAN_DIFF_H_
#define GPIPE_RUNTIME_PLAN_PLAN_DIFF_H_

#include <string>
#include <vector>

#include "proto/plan.pb.h"

namespace gpipe {

struct PlanDifference {
  std::string field;  // "pipeline.stages", "model.layers[2].linear.out_features"
  std::string now;    // the value in `now`, as plan text writes it ("(unset)" when absent)
  std::string before;
};

// Every scalar field (and every unset-versus-set message) that differs, depth first in declaration
// order. A repeated field of other length is one difference ("model.layers: 5 entries").
std::vector<PlanDifference> DiffPlans(const pb::Plan& before, const pb::Plan& now);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_PLAN_PLAN_DIFF_H_

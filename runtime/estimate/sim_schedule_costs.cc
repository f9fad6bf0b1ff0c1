#include "runtime/estimate/sim_schedule_costs.h"

#include <algorithm>

#include "runtime/core/status_macros.h"
#include "runtime/estimate/sim_costs.h"

namespace gpipe {
namespace {

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

}  // namespace

absl::StatusOr<schedule::OpCosts> SimScheduleCosts(const AnalyzedPlan& plan) {
  const int64_t micro_batch_size = MicroBatchSize(plan.plan);
  ASSIGN_OR_RETURN(const SimCosts costs,
                   SimCosts::Create(plan.plan.runtime().sim(), micro_batch_size));
  schedule::OpCosts out;
  out.send = 0;
  for (size_t p = 0; p < plan.stages.size(); ++p) {
    const StageInfo& part = plan.stages[p];
    double forward = 0, backward_input = 0, backward_weight = 0;
    for (int l = part.first_layer; l < part.end_layer; ++l) {
      const LayerInfo& layer = plan.layers[l];
      // LayerInfo counts forward + backward as three forwards.
      const SimOpTimes times = costs.ForLayer(layer.name, layer.flops_per_sample / 3.0);
      forward += Ms(times.forward);
      if (layer.splits_backward) {
        backward_input += Ms(times.backward_input);
        backward_weight += Ms(times.backward_weight);
      } else {
        backward_input += Ms(times.backward_input + times.backward_weight);
      }
    }
    if (p + 1 == plan.stages.size()) forward += Ms(costs.loss());
    out.stage_forward.push_back(forward);
    out.stage_backward_input.push_back(backward_input);
    out.stage_backward_weight.push_back(backward_weight);
    const int64_t boundary_bytes = part.output_shape.num_elements() * micro_batch_size * 4;
    out.send = std::max(out.send, Ms(costs.Transfer(boundary_bytes)));
  }
  return out;
}

}  // namespace gpipe

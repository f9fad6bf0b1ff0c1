#include "runtime/estimate/flop_costs.h"

#include <algorithm>
#include <cstddef>

namespace gpipe {

schedule::OpCosts CostsFromFlops(const AnalyzedPlan& plan) {
  schedule::OpCosts costs;
  double total = 0.0;
  for (const StageInfo& s : plan.stages) total += s.flops_per_sample;
  // The unit is a mean *stage's* forward (all of its chunks), so schedules with and without
  // interleaving are timed on the same scale.
  const int stages = std::max(1, plan.plan.pipeline().stages());
  const double mean = total / stages;
  const double parts = std::max<size_t>(1, plan.stages.size());
  // One entry per part, which is also its virtual stage.
  for (const StageInfo& s : plan.stages) {
    // A zero-FLOP model still takes a little time per part (the same on every part).
    const double forward = std::max(mean > 0 ? s.flops_per_sample / mean : stages / parts, 1e-3);
    // Backward is twice the forward (FLOPs = 3x forward). Under a split backward, the weight
    // half is the weight gradients of the layers that split (half of their backward); all the
    // rest runs in the input half. A combined Backward costs the sum either way.
    const double split_share =
        s.flops_per_sample > 0 ? s.split_flops_per_sample / s.flops_per_sample : 0.0;
    costs.stage_forward.push_back(forward);
    costs.stage_backward_input.push_back(forward * (2.0 - split_share));
    costs.stage_backward_weight.push_back(forward * split_share);
  }
  return costs;
}

}  // namespace gpipe

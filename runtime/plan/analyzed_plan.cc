#include "runtime/plan/analyzed_plan.h"

namespace gpipe {

int64_t MicroBatchSize(const pb::Plan& plan) {
  const int64_t parts = int64_t{plan.pipeline().data_parallel()} * plan.pipeline().micro_batches();
  return parts > 0 ? plan.training().global_batch() / parts : 0;
}

std::vector<pb::StageSpec> ToStageSpecs(const AnalyzedPlan& plan) {
  std::vector<pb::StageSpec> specs;
  specs.reserve(plan.stages.size());
  for (const StageInfo& stage : plan.stages) {
    pb::StageSpec& spec = specs.emplace_back();
    spec.set_stage(stage.part);
    spec.set_first_layer(stage.first_layer);
    spec.set_end_layer(stage.end_layer);
    for (int64_t d : stage.input_shape.dims()) spec.add_input_shape(d);
    for (int64_t d : stage.output_shape.dims()) spec.add_output_shape(d);
    spec.set_parameters(stage.parameters);
    spec.set_flops(stage.flops_per_sample);
  }
  return specs;
}

}  // namespace gpipe

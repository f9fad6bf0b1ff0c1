#include "runtime/estimate/schedule_prediction.h"

#include <algorithm>
#include <cmath>

#include "runtime/core/status_macros.h"
#include "runtime/estimate/flop_costs.h"
#include "runtime/estimate/sim_schedule_costs.h"
#include "runtime/exec/stage_executor.h"
#include "runtime/plan/plan_program.h"

namespace gpipe {

int OptimizerStateFactor(const pb::Optimizer& optimizer) {
  if (optimizer.has_sgd()) return optimizer.sgd().momentum() != 0 ? 1 : 0;
  return 2;  // Adam, AdamW: two moments
}

double OptimizerBytesPerElement(const pb::Plan& plan) {
  const double bytes = 4.0 * OptimizerStateFactor(plan.training().optimizer());
  const int replicas = plan.pipeline().data_parallel();
  return plan.training().shard_optimizer_state() && replicas > 1 ? bytes / replicas : bytes;
}

double ParameterBytes(const pb::Plan& plan, int64_t parameters, int64_t product_parameters) {
  const double copies = plan.training().precision() == pb::BF16 ? 2.0 * product_parameters : 0.0;
  return static_cast<double>(parameters) * (8.0 + OptimizerBytesPerElement(plan)) + copies;
}

absl::StatusOr<SchedulePrediction> PredictSchedule(const AnalyzedPlan& plan,
                                                   const LayerRegistry& registry) {
  const pb::Pipeline& pipeline = plan.plan.pipeline();
  SchedulePrediction out;
  ASSIGN_OR_RETURN(out.program, TrainingProgramOf(plan));
  schedule::OpCosts costs = CostsFromFlops(plan);
  // On the simulated device the schedule is timed in milliseconds from runtime.sim's cost table
  // (the step time a SIM run should take); otherwise in relative FLOP units.
  if (plan.plan.runtime().device() == pb::SIM) {
    ASSIGN_OR_RETURN(costs, SimScheduleCosts(plan));
  }
  ASSIGN_OR_RETURN(out.simulation, schedule::VerifyProgram(out.program, costs));
  const int64_t micro_batch_size = MicroBatchSize(plan.plan);
  ASSIGN_OR_RETURN(const std::vector<PartBytes> parts,
                   MeasurePartBytes(plan, registry, micro_batch_size));
  out.activations = PredictActivationMemory(out.program, parts, pipeline.remat(),
                                            pipeline.offload(), kDefaultRecvLookahead);
  out.parameter_bytes.assign(pipeline.stages(), 0);
  out.optimizer_bytes.assign(pipeline.stages(), 0);
  for (const StageInfo& part : plan.stages) {
    out.parameter_bytes[part.stage] +=
        std::llround(ParameterBytes(plan.plan, part.parameters, part.product_parameters));
    out.optimizer_bytes[part.stage] +=
        std::llround(static_cast<double>(part.parameters) * OptimizerBytesPerElement(plan.plan));
  }
  return out;
}

absl::StatusOr<std::vector<pb::StageMemory>> PredictStageMemory(const AnalyzedPlan& plan,
                                                                const LayerRegistry& registry) {
  const int stages = plan.plan.pipeline().stages();
  std::vector<double> parameter_bytes(stages, 0.0);
  for (const StageInfo& part : plan.stages) {
    parameter_bytes[part.stage] +=
        ParameterBytes(plan.plan, part.parameters, part.product_parameters);
  }
  constexpr double kHuge = 4.6e18;  // 2^62: beyond any device, far from int64 overflow
  std::vector<pb::StageMemory> memory(stages);
  bool huge = false;
  for (int s = 0; s < stages; ++s) {
    huge = huge || parameter_bytes[s] > kHuge;
    memory[s].set_parameter_bytes(static_cast<int64_t>(std::min(parameter_bytes[s], kHuge)));
  }
  if (huge) return memory;
  ASSIGN_OR_RETURN(const SchedulePrediction prediction, PredictSchedule(plan, registry));
  for (int s = 0; s < stages; ++s) {
    memory[s].set_activation_bytes(prediction.activations[s].total);
  }
  return memory;
}

}  // namespace gpipe

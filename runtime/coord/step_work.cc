#include "runtime/coord/step_work.h"

#include <algorithm>

#include "runtime/schedule/topology.h"

namespace gpipe {

StepWork StepWorkOf(const pb::Setup& setup) {
  const pb::Plan& plan = setup.plan();
  const schedule::Topology topology = schedule::TopologyOf(plan.pipeline());
  const double replica_samples = static_cast<double>(plan.training().global_batch()) /
                                 std::max(1, plan.pipeline().data_parallel());
  StepWork work;
  work.stage_flops.assign(topology.stages, 0.0);
  // StageSpec.stage is the part's index, its virtual stage.
  for (const pb::StageSpec& part : setup.stages()) {
    const int stage = topology.At(part.stage()).stage;
    work.stage_flops[stage] += part.flops() * replica_samples;
  }
  const pb::Input& input = plan.model().input();
  if (input.type() == pb::INT64) {
    int64_t positions = 1;
    for (int64_t d : input.shape()) positions *= d;
    work.tokens = plan.training().global_batch() * positions;
  }
  if (plan.runtime().has_peak_tflops()) work.peak_tflops = plan.runtime().peak_tflops();
  return work;
}

void AddThroughput(const StepWork& work, StepSummary& summary) {
  const double seconds = summary.step_ms / 1000.0;
  const auto per_second = [seconds](double amount) { return seconds > 0 ? amount / seconds : 0.0; };
  if (work.tokens > 0) summary.tokens_per_s = per_second(static_cast<double>(work.tokens));
  summary.tflops_per_rank.clear();
  double sum = 0.0;
  for (int stage : summary.stage) {
    const double flops = stage >= 0 && stage < static_cast<int>(work.stage_flops.size())
                             ? work.stage_flops[stage]
                             : 0.0;
    summary.tflops_per_rank.push_back(per_second(flops) / 1e12);
    sum += summary.tflops_per_rank.back();
  }
  // The job's utilization: every rank's FLOPs over what all of them could do at the peak, i.e.
  // the mean rank's.
  if (work.peak_tflops > 0 && !summary.tflops_per_rank.empty()) {
    summary.mfu = sum / summary.tflops_per_rank.size() / work.peak_tflops;
  }
}

}  // namespace gpipe

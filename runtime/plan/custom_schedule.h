// Resolving a CUSTOM schedule (plan.proto's Schedule CUSTOM) before the other pipeline checks:
// exactly one of pipeline.custom and pipeline.schedule_csv with CUSTOM and neither otherwise; the
// CSV read (relative to the plan's directory) and its actions inlined into pipeline.custom; the
// program compiled and verified (custom_program.h), so a bad schedule is refused at plan check
// naming the row and the action; pipeline.virtual_stages set to its chunks per rank, which the
// partition then cuts, and pipeline.placement to where the actions put the virtual stages
// (LOOPED or V_SHAPE). Internal to the plan module.
#ifndef GPIPE_RUNTIME_PLAN_CUSTOM_SCHEDULE_H_
#define GPIPE_RUNTIME_PLAN_CUSTOM_SCHEDULE_H_

#include <string>

#include "proto/plan.pb.h"
#include "runtime/plan/plan_errors.h"

namespace gpipe {

// `directory`: where a relative schedule_csv resolves (the plan file's directory). Leaves the
// plan alone when it reports an error, and when pipeline.stages or micro_batches is invalid
// (CheckPipeline reports those).
void ResolveCustomSchedule(const std::string& directory, pb::Plan* plan, PlanErrors& errors);

// The placement and chunk count a built-in schedule implies: ZERO_BUBBLE_V and DUALPIPE_V run two
// chunks (virtual_stages set to 2 when absent; another value CheckPipeline reports) placed
// V_SHAPE; every other built-in runs LOOPED. A stated pipeline.placement that disagrees is an
// error naming the schedules that take it. CUSTOM is left to ResolveCustomSchedule.
void ResolvePlacement(pb::Plan* plan, PlanErrors& errors);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_PLAN_CUSTOM_SCHEDULE_H_

// Plan analysis: validates a loaded plan, infers every layer's shapes, parameters and FLOPs,
// and resolves the stage partition (explicit pipeline.boundaries, else the balancer on
// parameters or FLOPs per pipeline.balance). Pure: no MPI, no devices; layers are only built.
//
// Every semantic error is INVALID_ARGUMENT "<file:line:col>: <field path>: <what is wrong and
// what to do>", one per line, and all errors found are reported together.
#ifndef GPIPE_RUNTIME_PLAN_PLAN_ANALYSIS_H_
#define GPIPE_RUNTIME_PLAN_PLAN_ANALYSIS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "layers/registry.h"
#include "runtime/plan/analyzed_plan.h"
#include "runtime/plan/plan_loader.h"

namespace gpipe {

absl::StatusOr<AnalyzedPlan> AnalyzePlan(const LoadedPlan& loaded, const LayerRegistry& registry);

// The job must have exactly one process per stage of every replica (pipeline.stages *
// pipeline.data_parallel). INVALID_ARGUMENT like "the plan needs 4
// processes (pipeline.stages at plan.pbtxt:9:3) but the job has 2; launch with -n 4 or set
// pipeline.stages: 2".
absl::Status CheckWorldSize(const AnalyzedPlan& plan, const LoadedPlan& loaded, int world_size);

// Human-readable summary for `gpipe-plan check`: totals, one line per stage (layers, parameters,
// FLOPs/sample, input/output shapes), then one line per layer. Ends with a newline.
std::string FormatStageTable(const AnalyzedPlan& plan);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_PLAN_PLAN_ANALYSIS_H_

// BuildSetups: rank 0's start-up work, as a pure function: load the plan (file + overrides),
// validate it, infer shapes, resolve the partition, build and verify the schedule, and produce
// every rank's Setup message. Any problem is one error whose message is what every rank prints.
#ifndef GPIPE_RUNTIME_COORD_SETUP_BUILDER_H_
#define GPIPE_RUNTIME_COORD_SETUP_BUILDER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "layers/registry.h"
#include "proto/control.pb.h"
#include "runtime/coord/worker_options.h"
#include "runtime/plan/plan_analysis.h"
#include "runtime/schedule/verifier.h"

namespace gpipe {

struct ResolvedJob {
  AnalyzedPlan analyzed;
  schedule::VerifyResult prediction;  // simulated with per-stage FLOP costs
  std::vector<pb::Setup> setups;       // index = rank
};

absl::StatusOr<ResolvedJob> ResolveJob(const WorkerOptions& options, int world_size,
                                       const LayerRegistry& registry);

// Verifier costs from the plan's per-stage FLOPs: forward = FLOPs/3, backward = 2*FLOPs/3.
schedule::OpCosts CostsFromFlops(const AnalyzedPlan& plan);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COORD_SETUP_BUILDER_H_

// VerifyProgram: the gate every Program passes before it runs. It checks each stage's list
// (ranges, order, duplicates, completeness), pairs every send with its receive in order, and
// runs all stages together on a dependency model (a discrete-event simulation: receives wait
// for their send, sends never block) to prove the step terminates and to predict its time,
// bubble and activation memory. Errors are INVALID_ARGUMENT naming stage, instruction index and
// instruction. Pure; thread-compatible.
#ifndef GPIPE_RUNTIME_SCHEDULE_VERIFIER_H_
#define GPIPE_RUNTIME_SCHEDULE_VERIFIER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "runtime/schedule/program.h"

namespace gpipe::schedule {

// Durations in arbitrary time units. AllReduceGrads and OptimizerStep take no time.
struct OpCosts {
  double forward = 1.0;
  double backward = 2.0;
  double send = 0.0;  // transfer latency: a send issued at t is receivable at t + send
  double load = 0.0;  // LoadMicroBatch, on the stage that runs it
  std::vector<double> stage_forward, stage_backward;  // per-stage overrides; empty = uniform
};

// One executed instruction. A receive spans the time its stage waits for the data; a send is
// instantaneous on its stage (the transfer itself takes OpCosts::send).
struct TimelineEntry {
  int stage;
  int index;  // instruction index
  double start;
  double end;
};

struct VerifyResult {
  // Simulated step time.
  double makespan = 0;
  // Mean over stages of idle/makespan, counting only Forward/Backward as busy.
  double bubble_fraction = 0;
  // Per stage.
  std::vector<double> stage_bubble;
  // Per stage: max number of micro-batches forwarded but not yet backwarded (all chunks).
  std::vector<int> peak_live_activations;
  // Every instruction, ordered by (stage, index).
  std::vector<TimelineEntry> timeline;
};

// INVALID_ARGUMENT for a wrong program (see above) or bad costs (negative, non-finite, or
// per-stage overrides whose length is not the stage count).
absl::StatusOr<VerifyResult> VerifyProgram(const Program& program, const OpCosts& costs);

}  // namespace gpipe::schedule

#endif  // GPIPE_RUNTIME_SCHEDULE_VERIFIER_H_

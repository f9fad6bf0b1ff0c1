// The dependency model behind VerifyProgram: every stage runs its list in order; a receive
// completes when its paired send has been issued plus the transfer latency; sends never block;
// Forward, Backward, BackwardInput, BackwardWeight and LoadMicroBatch occupy their stage for
// their cost (OpCosts, per virtual stage). When no stage can progress before all have
// finished, the program deadlocks: INVALID_ARGUMENT naming each stuck stage's instruction and
// the send it waits for.
#ifndef GPIPE_RUNTIME_SCHEDULE_SIMULATOR_H_
#define GPIPE_RUNTIME_SCHEDULE_SIMULATOR_H_

#include <vector>

#include "absl/status/statusor.h"
#include "runtime/schedule/program.h"
#include "runtime/schedule/transfers.h"
#include "runtime/schedule/verifier.h"

namespace gpipe::schedule {

struct Simulation {
  double makespan = 0;
  std::vector<double> busy;  // per stage: time in Forward, Backward, BackwardInput, BackwardWeight
  std::vector<TimelineEntry> timeline;  // ordered by (stage, index)
};

// Preconditions: the program passed the stage checks and transfers.Check(); costs are valid.
absl::StatusOr<Simulation> Simulate(const Program& program, const Transfers& transfers,
                                    const OpCosts& costs);

}  // namespace gpipe::schedule

#endif  // GPIPE_RUNTIME_SCHEDULE_SIMULATOR_H_

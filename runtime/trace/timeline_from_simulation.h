// TimelineFromSimulation: the Timeline the schedule simulator predicts for a Program (the same
// dependency model VerifyProgram runs), in simulated time units. It lets `gpipe-plan timeline`
// draw a plan's step before anything runs, in the same picture as a measured trace. The title
// facts a Program knows (schedule, K, M, v) are filled; the caller adds the plan's name, remat
// policy and device. Pure.
#ifndef GPIPE_RUNTIME_TRACE_TIMELINE_FROM_SIMULATION_H_
#define GPIPE_RUNTIME_TRACE_TIMELINE_FROM_SIMULATION_H_

#include "absl/status/statusor.h"
#include "runtime/schedule/program.h"
#include "runtime/schedule/simulator.h"
#include "runtime/schedule/verifier.h"
#include "runtime/trace/timeline.h"

namespace gpipe::trace {

// One box per Forward, Backward, BackwardInput and BackwardWeight (and per LoadMicroBatch that
// takes time, as kOther); the window is [0, makespan]; predicted_bubble is the simulator's mean
// of 1 - busy/makespan. INVALID_ARGUMENT when `simulation` does not belong to `program` (an
// entry names a stage or instruction the program lacks).
absl::StatusOr<Timeline> TimelineFromSimulation(const schedule::Program& program,
                                                const schedule::Simulation& simulation);

// The same from VerifyProgram's result, which comes from the same simulator (so a plan's
// picture can reuse `gpipe-plan show`'s prediction); predicted_bubble is its bubble_fraction.
absl::StatusOr<Timeline> TimelineFromSimulation(const schedule::Program& program,
                                                const schedule::VerifyResult& verified);

}  // namespace gpipe::trace

#endif  // GPIPE_RUNTIME_TRACE_TIMELINE_FROM_SIMULATION_H_

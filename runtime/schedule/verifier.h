// VerifyProgram: the gate every Program passes before it runs. It checks each stage's list
// (ranges, order, duplicates, completeness; a micro-batch is backwarded by Backward or by
// BackwardInput then BackwardWeight; training programs end with AllReduceGrads, OptimizerStep,
// forward-only ones hold no backward side and end with ReportEval), pairs every send with its
// receive in order — per kind and link, as MPI matches by tag, and per pair of ranks across
// kinds, as NCCL matches by issue order (interleaved programs at K = 2 carry activations and
// gradients between the same two ranks) — and runs all stages together on a dependency model (a
// discrete-event simulation: receives wait for their send, sends never block) to prove the step
// terminates and to predict its time, bubble and activation memory. The proof holds for NCCL too:
// there each direction between two ranks has its own communicator whose operations match in issue
// order, and with the per-pair order checked, a receive still completes once its send is issued.
// Errors are INVALID_ARGUMENT naming stage, instruction index and instruction. Pure;
// thread-compatible.
#ifndef GPIPE_RUNTIME_SCHEDULE_VERIFIER_H_
#define GPIPE_RUNTIME_SCHEDULE_VERIFIER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "runtime/schedule/program.h"

namespace gpipe::schedule {

// Durations in arbitrary time units. AllReduceGrads, OptimizerStep and ReportEval take no
// time. A whole Backward costs backward_input + backward_weight: the same work as its
// zero-bubble split, so schedules compare fairly.
struct OpCosts {
  double forward = 1.0;
  double backward_input = 1.0;   // BackwardInput; part of Backward
  double backward_weight = 1.0;  // BackwardWeight; part of Backward
  double send = 0.0;             // transfer latency: a send issued at t is receivable at t + send
  double load = 0.0;             // LoadMicroBatch, on the stage that runs it
  // Per-virtual-stage overrides, index = virtual stage (Topology::VirtualStage); each empty
  // (uniform) or of size stages * chunks.
  std::vector<double> stage_forward, stage_backward_input, stage_backward_weight;
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
  // Mean over stages of idle/makespan, counting only Forward, Backward, BackwardInput and
  // BackwardWeight as busy.
  double bubble_fraction = 0;
  // Per stage.
  std::vector<double> stage_bubble;
  // Per stage: max number of micro-batches (all chunks) forwarded whose backward is not
  // complete (no Backward yet, or no BackwardWeight yet after BackwardInput); 0 for
  // forward-only programs, which keep nothing for a backward.
  std::vector<int> peak_live_activations;
  // Every instruction, ordered by (stage, index).
  std::vector<TimelineEntry> timeline;
};

// INVALID_ARGUMENT for a wrong program (see above) or bad costs (negative, non-finite, or
// per-virtual-stage overrides whose length is not stages * chunks).
absl::StatusOr<VerifyResult> VerifyProgram(const Program& program, const OpCosts& costs);

}  // namespace gpipe::schedule

#endif  // GPIPE_RUNTIME_SCHEDULE_VERIFIER_H_

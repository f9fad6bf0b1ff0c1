// StageExecutor: runs one stage's instruction list for each training step.
//
// It interprets schedule::Instruction values with std::visit (a kind without a handler does not
// compile), keeps per-(chunk, micro-batch) state (stage input, saved activations, gradients in
// flight, weight gradients deferred by BackwardInput), posts receives ahead of the instructions
// that consume them, sends asynchronously, applies the re-materialization policy
// (MicroBatchPlan), accumulates parameter gradients over micro-batches, and at OptimizerStep
// meets the coordinator through a GradientSyncGate before updating. Forward-only programs
// (ReportEval) run the layers in inference mode and report the loss through the same gate.
// Memory is counted by role: stage inputs kept as kBoundary, saved activations as kActivation,
// boundary gradients (received, or waiting to be sent) as kBoundaryGrad.
// With a TraceRecorder, each instruction, each transfer (post to completion) and the step itself
// are recorded. Every error names the rank, stage, step, micro-batch and instruction.
// stage_executor.cc holds the dispatch loop and one small handler per instruction; the parts of
// a step live beside it: StepScope (where, deadlines, trace), MicroBatchStates, StageCompute (the
// layers' forward and backward, loading, loss), StepTransfers (posted receives, sends in
// flight), GradientSync, StageInputOffload, StageUpdate (the optimizer step around the gate),
// StepReportBuilder (device scalars read once), DeviceBusyTime, StepGraphs (runtime.cuda.graphs
// within the step); across steps, InstructionGraphs (Forward and Backward captured once and
// replayed).
// Single-threaded.
#ifndef GPIPE_RUNTIME_EXEC_STAGE_EXECUTOR_H_
#define GPIPE_RUNTIME_EXEC_STAGE_EXECUTOR_H_

#include <memory>

#include "absl/status/statusor.h"
#include "proto/control.pb.h"
#include "runtime/exec/executor_config.h"
#include "runtime/exec/micro_batch_plan.h"
#include "runtime/schedule/instruction.h"

namespace gpipe {

class InstructionGraphs;
struct StepScalars;

class StageExecutor {
 public:
  StageExecutor(ExecutorConfig config, schedule::StageProgram program, ExecutorResources resources);
  ~StageExecutor();
  StageExecutor(const StageExecutor&) = delete;
  StageExecutor& operator=(const StageExecutor&) = delete;

  // Runs the program once for `command` (sample indices, learning rate). The returned report is
  // the one given to the gate.
  absl::StatusOr<pb::StepReport> RunStep(const pb::StepCommand& command);

 private:
  class Step;
  ExecutorConfig config_;
  schedule::StageProgram program_;
  ExecutorResources resources_;
  std::unique_ptr<MicroBatchPlan> plan_;
  std::unique_ptr<StepScalars> scalars_;       // the reports' scalars kept for the graphs
  std::unique_ptr<InstructionGraphs> graphs_;  // what runtime.cuda.graphs captured
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_EXEC_STAGE_EXECUTOR_H_

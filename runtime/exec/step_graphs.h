// StepGraphs: runtime.cuda.graphs within one training step, for the executor's Forward and
// Backward handlers. Before the step's first instruction it makes what captured work reads but
// no capture should issue (Prepare); then a captured chunk's Forward and Backward run as graphs
// from the executor's InstructionGraphs: replayed where captured, captured now from the second
// training step on, else issued as they are (StageCompute). The host's record of a micro-batch
// after a replay is what StageCompute leaves after issuing the same work. Single-threaded; lives
// for one step.
#ifndef GPIPE_RUNTIME_EXEC_STEP_GRAPHS_H_
#define GPIPE_RUNTIME_EXEC_STEP_GRAPHS_H_

#include "absl/status/status.h"
#include "proto/control.pb.h"
#include "runtime/comm/data_channel.h"
#include "runtime/exec/executor_config.h"
#include "runtime/exec/gradient_sync.h"
#include "runtime/exec/instruction_graphs.h"
#include "runtime/exec/micro_batch_state.h"
#include "runtime/exec/stage_compute.h"
#include "runtime/exec/step_report_builder.h"
#include "runtime/schedule/instruction.h"
#include "runtime/schedule/topology.h"

namespace gpipe {

class StepGraphs {
 public:
  // Whether a step of `plan` runs any chunk as graphs: a training step with chunks `graphs`
  // captures. The step's report scalars must then be kept across steps (StepScalars), since
  // replayed work adds into the same device buffers.
  static bool Active(const MicroBatchPlan& plan, const InstructionGraphs& graphs) {
    return !plan.forward_only() && graphs.CapturesAny();
  }

  // All references must outlive the object; `grad_sync` as StageCompute's.
  StepGraphs(const ExecutorConfig& config, const ExecutorResources& resources,
             const MicroBatchPlan& plan, InstructionGraphs& graphs, StageCompute& compute,
             StepReportBuilder& report, GradientSync* grad_sync);

  bool active() const { return active_; }
  // Whether `chunk`'s Forward and (whole) Backward run as graphs this step.
  bool Captures(int chunk) const { return active_ && graphs_.CapturesChunk(chunk); }

  // Before the first instruction of an active step: the product operands' bf16 copies (made
  // again once per update) and the zeroed loss totals of the pipeline's last chunk.
  absl::Status Prepare();
  // StageCompute::Forward of a checked micro-batch as a graph. The saved tensors stay the
  // graph's: only the Backward's graph reads them.
  absl::Status Forward(const schedule::Forward& op, MicroBatch& mb);
  // StageCompute::Backward (whole) as a graph; the layers whose gradients it accumulated are
  // told to the replicas' sync after each launch.
  absl::Status Backward(int chunk, int m, MicroBatch& mb);
  // Where the receive `key` should land: the input buffer of the graph that reads it (a stage
  // input for the Forward's, an output gradient for the Backward's), so that the launch copies
  // nothing; undefined for a chunk not captured, a skip connection's transfer, or work without
  // a graph yet. The buffer is free: its last reader was the same graph's launch in an earlier
  // step, which the receive's writes are ordered after (data_channel.h).
  Tensor ReceiveBuffer(const TransferKey& key) const;
  // The step's graph launches and captures, into the report (active steps).
  void Report(pb::StepReport& report) const;

 private:
  const ExecutorConfig& config_;
  const ExecutorResources& res_;
  InstructionGraphs& graphs_;
  StageCompute& compute_;
  StepReportBuilder& report_;
  GradientSync* grad_sync_;
  const schedule::Topology topology_;
  const bool active_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_EXEC_STEP_GRAPHS_H_

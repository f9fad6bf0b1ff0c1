#include "runtime/exec/step_graphs.h"

#include <vector>

#include "runtime/core/status_macros.h"

namespace gpipe {

StepGraphs::StepGraphs(const ExecutorConfig& config, const ExecutorResources& resources,
                       const MicroBatchPlan& plan, InstructionGraphs& graphs, StageCompute& compute,
                       StepReportBuilder& report, GradientSync* grad_sync)
    : config_(config),
      res_(resources),
      graphs_(graphs),
      compute_(compute),
      report_(report),
      grad_sync_(grad_sync),
      topology_(config.topology()),
      active_(Active(plan, graphs)) {}

absl::Status StepGraphs::Prepare() {
  graphs_.BeginTrainingStep();
  for (int chunk = 0; chunk < config_.chunks; ++chunk) {
    if (!graphs_.CapturesChunk(chunk)) continue;
    for (int l = 0; l < res_.chunks[chunk].model->num_layers(); ++l) {
      RETURN_IF_ERROR(res_.chunks[chunk].parameters->ProductOperandsOf(l).status());
    }
    if (topology_.IsLast({config_.stage, chunk})) RETURN_IF_ERROR(report_.LossTotals().status());
  }
  return absl::OkStatus();
}

absl::Status StepGraphs::Forward(const schedule::Forward& op, MicroBatch& mb) {
  const bool last = topology_.IsLast({config_.stage, op.chunk});
  const InstructionGraphs::Key key{
      .chunk = op.chunk, .micro_batch = op.micro_batch, .pass = InstructionGraphs::Pass::kForward};
  std::vector<Tensor> inputs = {mb.input};
  if (last) inputs.push_back(mb.targets);
  ASSIGN_OR_RETURN(const InstructionGraphs::Graph* graph, graphs_.Replay(key, inputs));
  if (graph != nullptr) {
    mb.forwarded = true;
    mb.input = graph->inputs[0].buffer;
    mb.targets = Tensor();
    (last ? mb.output_grad : mb.output) = graph->output;
    return absl::OkStatus();
  }
  if (!graphs_.MayCapture()) return compute_.Forward(op.chunk, op.micro_batch, mb);
  std::vector<Tensor*> captured_inputs = {&mb.input};
  if (last) captured_inputs.push_back(&mb.targets);
  return graphs_
      .Capture(
          key, captured_inputs,
          [&](std::vector<int>&) { return compute_.Forward(op.chunk, op.micro_batch, mb); },
          [&] { return last ? mb.output_grad : mb.output; })
      .status();
}

absl::Status StepGraphs::Backward(int chunk, int m, MicroBatch& mb) {
  RETURN_IF_ERROR(StageCompute::CheckBackward(mb));
  const InstructionGraphs::Key key{
      .chunk = chunk, .micro_batch = m, .pass = InstructionGraphs::Pass::kBackward};
  const Tensor inputs[] = {mb.output_grad};
  ASSIGN_OR_RETURN(const InstructionGraphs::Graph* graph, graphs_.Replay(key, inputs));
  if (graph != nullptr) {
    // What StageCompute::Backward leaves.
    mb.output_grad = Tensor();
    mb.input = Tensor();
    mb.saved.clear();
    mb.input_grad_done = true;
    mb.input_grad = graph->output;
  } else if (!graphs_.MayCapture()) {
    return compute_.Backward(chunk, m, mb, /*split=*/false);
  } else {
    Tensor* const captured_inputs[] = {&mb.output_grad};
    ASSIGN_OR_RETURN(graph, graphs_.Capture(
                                key, captured_inputs,
                                [&](std::vector<int>& accumulated) {
                                  compute_.ListAccumulated(&accumulated);
                                  const absl::Status status =
                                      compute_.Backward(chunk, m, mb, /*split=*/false);
                                  compute_.ListAccumulated(nullptr);
                                  return status;
                                },
                                [&] { return mb.input_grad; }));
  }
  if (grad_sync_ == nullptr) return absl::OkStatus();
  for (const int layer : graph->accumulated) {
    RETURN_IF_ERROR(grad_sync_->Accumulated(chunk, layer));
  }
  return absl::OkStatus();
}

Tensor StepGraphs::ReceiveBuffer(const TransferKey& key) const {
  if (!Captures(key.chunk) || key.skip_layer >= 0) return Tensor();
  const InstructionGraphs::Key graph{.chunk = key.chunk,
                                     .micro_batch = key.micro_batch,
                                     .pass = key.kind == TransferKind::kActivation
                                                 ? InstructionGraphs::Pass::kForward
                                                 : InstructionGraphs::Pass::kBackward};
  return graphs_.InputBuffer(graph, 0);
}

void StepGraphs::Report(pb::StepReport& report) const {
  report.set_graph_launches(graphs_.launches());
  report.set_graphs_captured(graphs_.captures());
}

}  // namespace gpipe

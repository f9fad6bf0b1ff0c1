#include "runtime/exec/instruction_graphs.h"

#include <algorithm>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"

namespace gpipe {
namespace {

// The chunks whose program backpropagates whole (Backward) and the chunks that split it.
void BackwardsOf(const schedule::StageProgram& program, std::vector<bool>& whole,
                 std::vector<bool>& split) {
  const auto mark = [](std::vector<bool>& chunks, int chunk) {
    if (chunk >= 0 && chunk < static_cast<int>(chunks.size())) chunks[chunk] = true;
  };
  for (const schedule::Instruction& instruction : program.instructions) {
    if (const auto* op = std::get_if<schedule::Backward>(&instruction)) mark(whole, op->chunk);
    if (const auto* op = std::get_if<schedule::BackwardInput>(&instruction)) mark(split, op->chunk);
    if (const auto* op = std::get_if<schedule::BackwardWeight>(&instruction)) {
      mark(split, op->chunk);
    }
  }
}

// Every layer's work is the same whatever the step, and none joins or is joined by a skip
// connection (their tensors would be inputs and outputs of their own).
bool ReplayableModel(const StageModel& model) {
  for (int l = 0; l < model.num_layers(); ++l) {
    const Layer& layer = model.layer(l);
    if (layer.DependsOnStep() || layer.skip_join() != nullptr || !model.skip_readers(l).empty()) {
      return false;
    }
  }
  return true;
}

}  // namespace

InstructionGraphs::InstructionGraphs(Device& device, const ExecutorConfig& config,
                                     const schedule::StageProgram& program,
                                     std::span<const ChunkRefs> chunks)
    : device_(device), captured_(chunks.size(), false) {
  if (!config.capture_graphs || config.shard_optimizer_state ||
      config.offload == pb::STAGE_INPUTS) {
    return;
  }
  std::vector<bool> whole(chunks.size(), false);
  std::vector<bool> split(chunks.size(), false);
  BackwardsOf(program, whole, split);
  for (size_t c = 0; c < chunks.size(); ++c) {
    captured_[c] =
        whole[c] && !split[c] && chunks[c].model != nullptr && ReplayableModel(*chunks[c].model);
  }
}

bool InstructionGraphs::CapturesAny() const {
  return std::find(captured_.begin(), captured_.end(), true) != captured_.end();
}

void InstructionGraphs::BeginTrainingStep() {
  ++training_steps_;
  launches_ = 0;
  captures_ = 0;
}

bool InstructionGraphs::IsGraphOutput(const Tensor& tensor) const {
  for (const auto& [key, graph] : graphs_) {
    if (graph.output.defined() && graph.output.raw_data() == tensor.raw_data()) return true;
  }
  return false;
}

Tensor InstructionGraphs::InputBuffer(const Key& key, size_t index) const {
  const auto it = graphs_.find(key);
  if (it == graphs_.end() || index >= it->second.inputs.size() || !it->second.inputs[index].copy) {
    return Tensor();
  }
  return it->second.inputs[index].buffer;
}

absl::StatusOr<const InstructionGraphs::Graph*> InstructionGraphs::Replay(
    const Key& key, std::span<const Tensor> inputs) {
  const auto it = graphs_.find(key);
  if (it == graphs_.end()) return nullptr;
  Graph& graph = it->second;
  if (inputs.size() != graph.inputs.size()) {
    return absl::InternalError(absl::StrCat("the graph was captured with ", graph.inputs.size(),
                                            " input(s), launched with ", inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    Graph::Input& kept = graph.inputs[i];
    const Tensor& input = inputs[i];
    if (!input.defined() || input.shape() != kept.buffer.shape() ||
        input.dtype() != kept.buffer.dtype()) {
      return absl::InvalidArgumentError(absl::StrCat("input ", i, " of the captured work is ",
                                                     input.DebugString(), ", it was captured with ",
                                                     kept.buffer.DebugString()));
    }
    if (input.raw_data() == kept.buffer.raw_data()) continue;
    if (!kept.copy) {
      return absl::InternalError(absl::StrCat(
          "input ", i,
          " of the captured work was an earlier graph's output and lies elsewhere now"));
    }
    RETURN_IF_ERROR(device_.ops().tensor.Copy(input, kept.buffer));
  }
  RETURN_IF_ERROR(graph.work->Launch());
  ++launches_;
  return &graph;
}

absl::StatusOr<const InstructionGraphs::Graph*> InstructionGraphs::Capture(
    const Key& key, std::span<Tensor* const> inputs,
    const std::function<absl::Status(std::vector<int>& accumulated)>& issue,
    const std::function<Tensor()>& output) {
  if (graphs_.contains(key)) return absl::InternalError("the work was captured already");
  Graph graph;
  for (Tensor* input : inputs) {
    if (IsGraphOutput(*input)) {
      graph.inputs.push_back({.buffer = views_.Of(*input), .copy = false});
      continue;
    }
    ASSIGN_OR_RETURN(Tensor buffer,
                     Tensor::Empty(device_, input->shape(), input->dtype(), input->memory_kind()));
    RETURN_IF_ERROR(device_.ops().tensor.Copy(*input, buffer));
    *input = buffer;
    graph.inputs.push_back({.buffer = std::move(buffer), .copy = true});
  }
  constexpr char kWhat[] =
      "capturing the instruction's work (runtime.cuda.graphs; false runs it uncaptured)";
  RETURN_IF_ERROR(WithContext(device_.BeginCapture(), kWhat));
  const absl::Status issued = issue(graph.accumulated);
  absl::StatusOr<std::unique_ptr<WorkGraph>> work = device_.EndCapture();
  RETURN_IF_ERROR(WithContext(issued, kWhat));
  RETURN_IF_ERROR(WithContext(work.status(), kWhat));
  graph.work = *std::move(work);
  graph.output = views_.Of(output());
  RETURN_IF_ERROR(graph.work->Launch());
  ++captures_;
  ++launches_;
  return &graphs_.emplace(key, std::move(graph)).first->second;
}

}  // namespace gpipe

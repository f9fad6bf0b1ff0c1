// InstructionGraphs: runtime.cuda.graphs for one stage. A training step's Forward and Backward of
// each (chunk, micro-batch) is captured once (Device::BeginCapture), in the second training step
// the executor runs, and every later step launches the graph instead of issuing its kernels one
// by one. The first step runs uncaptured, so what layers make on first use (cuDNN's algorithm
// choices, cuBLASLt's, workspaces) exists before any capture. Transfers, loads, the update and
// the schedule stay outside the graphs, and so does the host's record of each micro-batch's state,
// which the executor keeps as for uncaptured work.
// - Inputs. A tensor the captured work reads that comes from outside the graphs each step (a
//   loaded or received stage input, targets, a received output gradient) is copied, before each
//   launch, into a buffer kept for the graph, unless it is already there (receives land in it
//   directly: InputBuffer, StepTransfers::ReceiveInto). One that an earlier graph of the step
//   produced (the loss gradient of the last chunk's forward, a V-shape hand-off) is read where it
//   lies: graphs launch in the order they were captured, so it holds this step's value.
// - Outputs. The host gets a view of what the graph writes for it (the forward's output, or the
//   loss gradient on the pipeline's last chunk; the backward's input gradient): the same memory in
//   every step, which the capture arena keeps for the graph.
// - What stays uncaptured: chunks that cannot be replayed as captured (CapturesChunk) run as
//   without graphs, their instructions among the launches.
// Single-threaded; lives as long as its executor, across steps; destroy it before the device.
#ifndef GPIPE_RUNTIME_EXEC_INSTRUCTION_GRAPHS_H_
#define GPIPE_RUNTIME_EXEC_INSTRUCTION_GRAPHS_H_

#include <compare>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/core/tensor.h"
#include "runtime/device/device.h"
#include "runtime/exec/executor_config.h"
#include "runtime/exec/stage_chunks.h"
#include "runtime/schedule/instruction.h"

namespace gpipe {

class InstructionGraphs {
 public:
  enum class Pass { kForward, kBackward };
  struct Key {
    int chunk = 0;
    int micro_batch = 0;
    Pass pass = Pass::kForward;
    auto operator<=>(const Key&) const = default;
  };
  struct Graph {
    std::unique_ptr<WorkGraph> work;
    // Per input of Capture: the buffer it is copied into before each launch, or (copy false) a
    // view of the earlier graph's output it was, checked to be the same memory at each launch.
    struct Input {
      Tensor buffer;
      bool copy = true;
    };
    std::vector<Input> inputs;
    Tensor output;  // a view; undefined when the work produced nothing for the host
    // Local layers whose parameter gradients the work accumulates one micro-batch into, in order
    // (the executor tells the replicas' gradient sync after each launch).
    std::vector<int> accumulated;
  };

  // Decides which chunks are captured: none without config.capture_graphs; otherwise every chunk
  // whose program has a whole Backward (training) and no split one, without skip connections and
  // layers whose work changes with the step (Layer::DependsOnStep), unless
  // pipeline.offload STAGE_INPUTS or training.shard_optimizer_state (their host waits and copies
  // sit between layers) hold for the stage.
  InstructionGraphs(Device& device, const ExecutorConfig& config,
                    const schedule::StageProgram& program, std::span<const ChunkRefs> chunks);
  InstructionGraphs(const InstructionGraphs&) = delete;
  InstructionGraphs& operator=(const InstructionGraphs&) = delete;

  bool CapturesChunk(int chunk) const {
    return chunk >= 0 && chunk < static_cast<int>(captured_.size()) && captured_[chunk];
  }
  bool CapturesAny() const;

  // A training step begins (the counts of the last one reset). The first one captures nothing.
  void BeginTrainingStep();
  // Whether this step may capture what has no graph yet (the second training step on).
  bool MayCapture() const { return training_steps_ > 1; }

  // The graph of `key` launched, with `inputs` (in Capture's order) first copied into its
  // buffers; null when `key` has no graph (nothing launched). INVALID_ARGUMENT when an input's
  // shape or dtype is not the captured one, INTERNAL when an earlier graph's output moved.
  absl::StatusOr<const Graph*> Replay(const Key& key, std::span<const Tensor> inputs);

  // Captures `issue` (the instruction's work as issued uncaptured, host state included) and
  // launches it. First each of `inputs` that no graph produced is copied into a new buffer kept
  // for the graph and replaced by it, so the work reads it there. `issue` lists the local layers
  // whose gradients it accumulated in its argument; `output`, called after it, gives the tensor
  // later launches hand to the host. A failed capture leaves no graph and its error is returned.
  absl::StatusOr<const Graph*> Capture(
      const Key& key, std::span<Tensor* const> inputs,
      const std::function<absl::Status(std::vector<int>& accumulated)>& issue,
      const std::function<Tensor()>& output);

  // The buffer input `index` of `key`'s graph is copied into before each launch (a receive may
  // land there directly, and the launch then copies nothing); undefined when `key` has no graph
  // or that input is an earlier graph's output.
  Tensor InputBuffer(const Key& key, size_t index) const;

  // This step's graph launches, and how many of them were captured first.
  int launches() const { return launches_; }
  int captures() const { return captures_; }

 private:
  // Whether `tensor` lies where a graph's output does (what the host got from it).
  bool IsGraphOutput(const Tensor& tensor) const;

  Device& device_;
  std::vector<bool> captured_;  // per chunk
  int64_t training_steps_ = 0;
  int launches_ = 0;
  int captures_ = 0;
  Tensor::UnownedViews views_;
  std::map<Key, Graph> graphs_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_EXEC_INSTRUCTION_GRAPHS_H_

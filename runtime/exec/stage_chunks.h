// StageChunks: everything one stage owns for its model chunks. A stage runs one contiguous slice
// of the model, or, under INTERLEAVED_1F1B, `virtual_stages` slices that are not contiguous
// (chunk c of stage s is model part c*K+s). Each chunk has its layers (StageModel), their
// parameters and gradients (ParameterStore) and its optimizer state (Optimizer); the optimizer
// rules are elementwise, so one optimizer per chunk updates exactly as one for the stage would.
// Move-only; owns its parts.
#ifndef GPIPE_RUNTIME_EXEC_STAGE_CHUNKS_H_
#define GPIPE_RUNTIME_EXEC_STAGE_CHUNKS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "layers/registry.h"
#include "proto/checkpoint.pb.h"
#include "proto/control.pb.h"
#include "proto/plan.pb.h"
#include "runtime/ckpt/safetensors.h"
#include "runtime/core/element_range.h"
#include "runtime/device/device.h"
#include "runtime/exec/parameter_store.h"
#include "runtime/exec/stage_model.h"
#include "runtime/schedule/topology.h"
#include "runtime/train/optimizer.h"

namespace gpipe {

// The part of the model one chunk runs: layers [first_layer, end_layer) whose first layer
// takes per-sample inputs of `input_shape`.
struct ChunkSpec {
  int first_layer = 0;
  int end_layer = 0;
  Shape input_shape;
};

// What the executor needs of one chunk; pointers into a StageChunks (or a test's own objects).
struct ChunkRefs {
  const StageModel* model = nullptr;
  ParameterStore* parameters = nullptr;
  Optimizer* optimizer = nullptr;
};

// Where one parameter sits in a stage: chunk `chunk`'s ParameterStore, position `index` of its
// values() and grads().
struct ParameterSlot {
  int chunk = 0;
  int index = 0;
};

// How a backend adapts one chunk after it is built: may decorate the model's layers and loss and
// replace the optimizer (the simulated device's stand-ins). Null: the chunk runs as built.
using ChunkAdapter =
    std::function<absl::Status(StageModel& model, std::unique_ptr<Optimizer>& optimizer)>;

class StageChunks {
 public:
  // One chunk per spec, in chunk order, each adapted by `adapter` (when not null) before its
  // parameters are created. Parameters are initialized from `training.seed`. `ties`: the
  // model's tied parameters (see ParameterStore::Create). Under training.shard_optimizer_state
  // each chunk's optimizer is a ShardedOptimizer of data-parallel replica `replica`.
  static absl::StatusOr<StageChunks> Create(Device& device, const pb::Plan& plan,
                                            const std::vector<ChunkSpec>& specs,
                                            const LayerRegistry& registry,
                                            std::span<const pb::TieGroup> ties = {},
                                            const ChunkAdapter& adapter = nullptr, int replica = 0);
  // The specs of stage `stage`'s chunks from the resolved stage table (one entry per model
  // part, part j running where `topology` puts virtual stage j), chunk 0 first.
  static std::vector<ChunkSpec> SpecsForStage(const std::vector<pb::StageSpec>& parts, int stage,
                                              const schedule::Topology& topology);

  int num_chunks() const { return static_cast<int>(models_.size()); }
  std::vector<ChunkRefs> refs();
  const ParameterStore& parameters(int chunk) const { return *parameters_[chunk]; }
  const Optimizer& optimizer(int chunk) const { return *optimizers_[chunk]; }

  // Every slot holding parameter `name`, in chunk order (empty when no chunk holds it).
  std::vector<ParameterSlot> SlotsOf(const std::string& name) const;

  // Every chunk's parameters by name, chunk order.
  absl::StatusOr<std::vector<NamedTensorData>> Export() const;
  // Overwrites every chunk's parameters by name (see ParameterStore::Import).
  absl::Status Import(const std::vector<NamedTensorData>& tensors);

  // Checkpoints. Every tensor this stage saves: each chunk's parameters, buffers and optimizer
  // state ("fc1.weight:exp_avg", none before the first update; under
  // training.shard_optimizer_state this replica's parts of it), with its manifest entry (name,
  // whole shape, kind, and for a part its element range; no shard).
  struct SavedTensors {
    std::vector<NamedTensorData> tensors;
    std::vector<pb::CheckpointTensor> entries;  // one per tensor
  };
  // `with_values` false leaves the parameters and buffers out (a replica other than the first
  // saves only its parts of a sharded optimizer state).
  absl::StatusOr<SavedTensors> SaveState(bool with_values = true) const;
  // Whether the optimizer state is sharded over the replicas (each saves its own parts).
  bool sharded_optimizer_state() const { return replicas_ > 1; }
  // The names a checkpoint must hold for this stage after `optimizer_steps` updates (the
  // optimizer state only when > 0).
  std::vector<std::string> StateNames(int64_t optimizer_steps) const;
  // Restores parameters, buffers and optimizer state (to `optimizer_steps` updates) from
  // `tensors`, by name; names of other stages are ignored. Errors name the missing or misshapen
  // tensor.
  absl::Status RestoreState(const std::vector<NamedTensorData>& tensors, int64_t optimizer_steps);

 private:
  StageChunks() = default;
  // unique_ptr: ChunkRefs point at these, and StageChunks moves.
  std::vector<std::unique_ptr<StageModel>> models_;
  std::vector<std::unique_ptr<ParameterStore>> parameters_;
  std::vector<std::unique_ptr<Optimizer>> optimizers_;
  // Under training.shard_optimizer_state: this replica and the replica count (1: not sharded).
  int replica_ = 0;
  int replicas_ = 1;
  // The parts of chunk `chunk`'s parameters this replica's optimizer keeps state for; empty
  // when not sharded.
  std::vector<ElementRange> OptimizerParts(int chunk) const;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_EXEC_STAGE_CHUNKS_H_

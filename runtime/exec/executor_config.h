// ExecutorConfig and ExecutorResources: what a StageExecutor is built from (its stage's place in
// the pipeline and the objects it works with).
#ifndef GPIPE_RUNTIME_EXEC_EXECUTOR_CONFIG_H_
#define GPIPE_RUNTIME_EXEC_EXECUTOR_CONFIG_H_

#include <cstdint>
#include <map>
#include <vector>

#include "absl/time/time.h"
#include "proto/control.pb.h"
#include "proto/plan.pb.h"
#include "runtime/comm/data_channel.h"
#include "runtime/data/dataset.h"
#include "runtime/device/device.h"
#include "runtime/exec/gradient_buckets.h"
#include "runtime/exec/gradient_norm_terms.h"
#include "runtime/exec/gradient_sync_gate.h"
#include "runtime/exec/sharded_update.h"
#include "runtime/exec/stage_chunks.h"
#include "runtime/exec/tied_gradients.h"
#include "runtime/schedule/rank_layout.h"
#include "runtime/schedule/topology.h"
#include "runtime/trace/trace_recorder.h"

namespace gpipe {

// How many receives the executor posts ahead by default (the memory predictor assumes it).
inline constexpr int kDefaultRecvLookahead = 2;

struct ExecutorConfig {
  int rank = 0;
  int stage = 0;
  int num_stages = 1;
  // Model chunks this stage runs (pipeline.virtual_stages; 1 except for INTERLEAVED_1F1B).
  int chunks = 1;
  // Micro-batches of this replica's share of each mini-batch.
  int micro_batches = 1;
  // Samples of the whole mini-batch, over every replica (the loss is a mean over them).
  int64_t global_batch = 1;
  // Data parallelism: this rank's replica of `replicas`. Replica r trains on samples
  // [r * global_batch / replicas, (r + 1) * global_batch / replicas) of each step's command.
  int replica = 0;
  int replicas = 1;
  // training.shard_optimizer_state with replicas > 1: the gradient buckets are reduce-scattered,
  // the chunks' optimizers (ShardedOptimizer) update this replica's parts, and the updated
  // parameters are all-gathered after the update.
  bool shard_optimizer_state = false;
  pb::Remat remat = pb::EXCEPT_LAST;
  // pipeline.offload: STAGE_INPUTS moves re-materialized micro-batches' stage inputs to host
  // memory between their forward and backward (see MicroBatchPlan, StageInputOffload).
  pb::Offload offload = pb::KEEP_ON_DEVICE;
  uint64_t seed = 0;
  // Where the chunks' virtual stages run (pipeline.placement; topology.h).
  pb::Placement placement = pb::LOOPED;
  // Per chunk (index = chunk): the ranks of the virtual stages before and after it
  // (RankLayout::NeighbourRank): -1 where there is none, this rank itself at a V_SHAPE turn, whose
  // transfer is a local hand-off. Looped chunks wrap (stage K-1's chunk c feeds stage 0's c+1).
  struct Neighbours {
    int prev = -1;
    int next = -1;
  };
  std::vector<Neighbours> neighbours;
  // Skip connections across virtual stages with an end on this rank, by join layer (index in
  // model.layers): the rank at the other end (the join's for outputs this rank sends, the
  // producer's for those it receives; this rank itself when both ends are its chunks) and the
  // chunk each end runs as on its rank.
  std::map<int, schedule::SkipLinkEnds> skips;
  std::vector<int> replica_group;  // ranks holding this stage in every replica (this one included)
  absl::Duration wait_timeout = absl::Seconds(300);
  // Receives posted ahead of the instruction that consumes them.
  int recv_lookahead = kDefaultRecvLookahead;
  // The dtype boundary activations and gradients travel in: kF32, or kBF16 under
  // training.precision BF16 (whose layers produce bf16 values, so the narrowing is exact).
  DType boundary_dtype = DType::kF32;
  // runtime.cuda.graphs: training steps' Forward and Backward instructions are captured once
  // (Device::BeginCapture) and replayed (instruction_graphs.h). The device must capture (CUDA,
  // CPU).
  bool capture_graphs = false;

  schedule::Topology topology() const { return {num_stages, chunks, placement}; }
  // neighbours[chunk].prev or .next; -1 for a chunk outside the list.
  int NeighbourRank(int chunk, bool next) const {
    if (chunk < 0 || chunk >= static_cast<int>(neighbours.size())) return -1;
    return next ? neighbours[chunk].next : neighbours[chunk].prev;
  }
  // skips[join_layer].peer; -1 when this rank has no end of that connection.
  int SkipPeerRank(int join_layer) const {
    const auto it = skips.find(join_layer);
    return it == skips.end() ? -1 : it->second.peer;
  }
};

// What the executor works with; all references must outlive it.
struct ExecutorResources {
  Device& device;
  std::vector<ChunkRefs> chunks;  // index = chunk; config.chunks entries
  const Dataset* dataset;         // required on the first and last stage
  DataChannel& channel;
  GradientSyncGate& gate;
  // runtime.trace: where instructions and transfers are recorded (null: not traced).
  TraceRecorder* trace = nullptr;
  // With replicas > 1: the stage's gradient buckets and the group of its replicas that
  // all-reduces them (created at set-up with buckets->Layout(); null when there are no buckets);
  // both null with one replica.
  GradientBuckets* gradient_buckets = nullptr;
  ReduceGroup* replica_reducer = nullptr;
  // With replicas > 1 (null otherwise): under training.shard_optimizer_state the optimizer step
  // starts the all-gather of the updated parameters here, and every forward waits for the
  // buckets of its layers (the training and evaluation executors share it).
  ParameterGather* parameter_gather = nullptr;
  // The tie groups with members on this stage, resolved at set-up (tied_gradients.h): their
  // gradients are summed before each update.
  std::vector<TiedGradientSum> tied_gradients;
  // training.clip_grad_norm: the parameters whose squared gradients this stage reports for the
  // global norm (gradient_norm_terms.h), resolved at set-up; empty without clipping.
  std::vector<GradientNormTerm> gradient_norm_terms;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_EXEC_EXECUTOR_CONFIG_H_

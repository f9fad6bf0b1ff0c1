#include "runtime/schedule/zero_bubble_v_builder.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

#include "runtime/core/check.h"
#include "runtime/schedule/receive_order.h"

namespace gpipe::schedule {
namespace {

constexpr long long kNever = std::numeric_limits<long long>::max();

// One virtual stage of the unit-cost simulation: F, I and W each go in micro-batch order, so
// three counters say what is done; the end times let neighbours see what has arrived.
struct VirtualStageState {
  int forwarded = 0;
  int input_done = 0;  // I done for micro-batches 0 .. input_done - 1
  int weighted = 0;
  std::vector<long long> forward_end;  // per micro-batch; kNever until it runs
  std::vector<long long> input_end;
};

// The list scheduler the header describes.
class VListScheduler {
 public:
  VListScheduler(int stages, int micro_batches)
      : topology_{stages, 2, pb::V_SHAPE},
        micro_batches_(micro_batches),
        cap_(ZeroBubbleVLiveCap(stages, micro_batches)),
        virtual_(topology_.virtual_stages()),
        orders_(stages) {
    for (VirtualStageState& v : virtual_) {
      v.forward_end.assign(micro_batches, kNever);
      v.input_end.assign(micro_batches, kNever);
    }
  }

  std::vector<std::vector<ChunkOp>> Run() && {
    const long long total = 3LL * topology_.virtual_stages() * micro_batches_;
    long long done = 0;
    // Every op takes one unit, so a time at which no rank starts one changes nothing: a stall.
    for (long long t = 0; done < total; ++t) {
      bool started = false;
      for (int r = 0; r < topology_.stages; ++r) {
        if (const std::optional<ChunkOp> op = Pick(r, t)) {
          Start(r, *op, t);
          ++done;
          started = true;
        }
      }
      GPIPE_CHECK(started) << "ZERO_BUBBLE_V list scheduler stalled at time " << t;
    }
    return std::move(orders_);
  }

 private:
  VirtualStageState& At(int rank, int chunk) {
    return virtual_[topology_.VirtualStage({rank, chunk})];
  }
  bool IsLast(int rank, int chunk) const { return topology_.IsLast({rank, chunk}); }
  bool IsFirst(int rank, int chunk) const { return topology_.IsFirst({rank, chunk}); }
  const VirtualStageState& Next(int rank, int chunk) const {
    return virtual_[topology_.VirtualStage({rank, chunk}) + 1];
  }
  const VirtualStageState& Previous(int rank, int chunk) const {
    return virtual_[topology_.VirtualStage({rank, chunk}) - 1];
  }

  // The highest-priority op rank `rank` can start at t, if any.
  std::optional<ChunkOp> Pick(int rank, long long t) {
    std::optional<ChunkOp> best;
    for (int chunk : {1, 0}) {  // 1. I, oldest micro-batch, chunk 1 on a tie
      const VirtualStageState& v = At(rank, chunk);
      const int m = v.input_done;
      if (m >= v.forwarded || v.forward_end[m] > t) continue;
      if (!IsLast(rank, chunk) && Next(rank, chunk).input_end[m] > t) continue;
      if (!best || m < best->micro_batch) best = ChunkOp{ChunkPass::kBackwardInput, chunk, m};
    }
    if (best) return best;
    int live = 0;
    for (int chunk : {0, 1}) live += At(rank, chunk).forwarded - At(rank, chunk).weighted;
    if (live < cap_) {
      for (int chunk : {1, 0}) {  // 2. F, chunk 1 first
        const VirtualStageState& v = At(rank, chunk);
        const int m = v.forwarded;
        if (m >= micro_batches_) continue;
        if (!IsFirst(rank, chunk) && Previous(rank, chunk).forward_end[m] > t) continue;
        return ChunkOp{ChunkPass::kForward, chunk, m};
      }
    }
    for (int chunk : {1, 0}) {  // 3. W, oldest micro-batch, chunk 1 on a tie
      const VirtualStageState& v = At(rank, chunk);
      const int m = v.weighted;
      if (m >= v.input_done) continue;
      if (!best || m < best->micro_batch) best = ChunkOp{ChunkPass::kBackwardWeight, chunk, m};
    }
    return best;
  }

  void Start(int rank, const ChunkOp& op, long long t) {
    VirtualStageState& v = At(rank, op.chunk);
    const long long end = t + 1;
    switch (op.pass) {
      case ChunkPass::kForward:
        v.forward_end[v.forwarded++] = end;
        break;
      case ChunkPass::kBackwardInput:
        v.input_end[v.input_done++] = end;
        break;
      case ChunkPass::kBackwardWeight:
        ++v.weighted;
        break;
      case ChunkPass::kBackward:
        GPIPE_CHECK(false) << "ZERO_BUBBLE_V splits every backward";
    }
    orders_[rank].push_back(op);
  }

  const Topology topology_;
  const int micro_batches_;
  const int cap_;
  std::vector<VirtualStageState> virtual_;  // index = virtual stage
  std::vector<std::vector<ChunkOp>> orders_;
};

}  // namespace

int ZeroBubbleVLiveCap(int stages, int micro_batches) {
  return std::min(2 * stages, 2 * micro_batches);
}

std::vector<std::vector<ChunkOp>> ZeroBubbleVOrder(int stages, int micro_batches) {
  GPIPE_CHECK(stages >= 1 && micro_batches >= 1)
      << stages << " stages, " << micro_batches << " micro-batches";
  return VListScheduler(stages, micro_batches).Run();
}

Program VShapeProgram(pb::Schedule kind, int micro_batches,
                      const std::vector<std::vector<ChunkOp>>& orders) {
  const int stages = static_cast<int>(orders.size());
  Program program = EmptyProgram(kind, stages, micro_batches, 2, pb::V_SHAPE);
  const Topology topology = program.topology();
  for (int s = 0; s < stages; ++s) {
    std::vector<Instruction>& out = program.stage_programs[s].instructions;
    out.reserve(12 * static_cast<size_t>(micro_batches) + 2);
    for (const ChunkOp& op : orders[s]) AppendChunkOp(topology, s, op, out);
    AppendStepEnd(/*forward_only=*/false, out);
  }
  // Each direction between neighbours carries chunk 0's activations and chunk 1's gradients.
  MatchReceivesToSends(program);
  return program;
}

Program BuildZeroBubbleVProgram(int stages, int micro_batches) {
  return VShapeProgram(pb::ZERO_BUBBLE_V, micro_batches, ZeroBubbleVOrder(stages, micro_batches));
}

}  // namespace gpipe::schedule

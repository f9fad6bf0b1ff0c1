#include "runtime/schedule/dualpipe_v_builder.h"

#include <deque>
#include <vector>

#include "runtime/core/check.h"
#include "runtime/schedule/schedule_shape.h"
#include "runtime/schedule/zero_bubble_v_builder.h"

namespace gpipe::schedule {
namespace {

// One rank's order as the phases append to it: per chunk, the next micro-batch to forward and
// to backward, and the weight-gradient parts queued by split backwards (oldest first).
class RankOrder {
 public:
  void Forward(int chunk) { ops_.push_back({ChunkPass::kForward, chunk, forwarded_[chunk]++}); }
  // A whole backward, or (split) its input-gradient part with the weight part queued.
  void Backward(int chunk, bool split) {
    const int m = backwarded_[chunk]++;
    if (!split) {
      ops_.push_back({ChunkPass::kBackward, chunk, m});
      return;
    }
    ops_.push_back({ChunkPass::kBackwardInput, chunk, m});
    queued_.push_back({ChunkPass::kBackwardWeight, chunk, m});
  }
  void Weight() {
    GPIPE_CHECK(!queued_.empty()) << "DualPipeV runs a W with none queued";
    ops_.push_back(queued_.front());
    queued_.pop_front();
  }
  std::vector<ChunkOp> Finish() && {
    GPIPE_CHECK(queued_.empty()) << queued_.size() << " W's left queued";
    return std::move(ops_);
  }

 private:
  int forwarded_[2] = {0, 0};
  int backwarded_[2] = {0, 0};
  std::deque<ChunkOp> queued_;
  std::vector<ChunkOp> ops_;
};

std::vector<ChunkOp> PhasesOf(int rank, int ranks, int micro_batches) {
  RankOrder order;
  const int later = ranks - rank - 1;                    // ranks after this one
  for (int i = 0; i < 2 * later; ++i) order.Forward(0);  // 1
  for (int i = 0; i < rank + 1; ++i) {                   // 2
    order.Forward(0);
    order.Forward(1);
  }
  for (int i = 0; i < later; ++i) {  // 3
    order.Backward(1, /*split=*/true);
    order.Weight();
    order.Forward(1);
  }
  for (int i = 0; i < micro_batches - 2 * ranks + rank + 1; ++i) {  // 4
    order.Forward(0);
    order.Backward(1, false);
    order.Forward(1);
    order.Backward(0, false);
  }
  for (int i = 0; i < later; ++i) {  // 5
    order.Backward(1, false);
    order.Forward(1);
    order.Backward(0, false);
  }
  bool split = false;  // 6
  for (int i = 0; i < rank + 1; ++i) {
    if (i == (rank + 1) / 2 && rank % 2 == 1) split = true;
    order.Backward(1, split);
    if (i == (rank + 1) / 2 && rank % 2 == 0) split = true;
    order.Backward(0, split);
  }
  for (int i = 0; i < later; ++i) {  // 7
    order.Weight();
    order.Backward(0, true);
  }
  for (int i = 0; i < rank + 1; ++i) order.Weight();  // 8
  return std::move(order).Finish();
}

}  // namespace

bool DualPipeVDegenerates(int stages, int micro_batches) {
  return !DegenerateNote(pb::DUALPIPE_V, stages, micro_batches).empty();
}

std::vector<std::vector<ChunkOp>> DualPipeVOrder(int stages, int micro_batches) {
  GPIPE_CHECK(stages >= 1 && micro_batches >= 1)
      << stages << " stages, " << micro_batches << " micro-batches";
  if (DualPipeVDegenerates(stages, micro_batches)) return ZeroBubbleVOrder(stages, micro_batches);
  std::vector<std::vector<ChunkOp>> orders;
  for (int r = 0; r < stages; ++r) orders.push_back(PhasesOf(r, stages, micro_batches));
  return orders;
}

Program BuildDualPipeVProgram(int stages, int micro_batches) {
  return VShapeProgram(pb::DUALPIPE_V, micro_batches, DualPipeVOrder(stages, micro_batches));
}

}  // namespace gpipe::schedule

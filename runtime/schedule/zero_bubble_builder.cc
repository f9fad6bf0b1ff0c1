#include "runtime/schedule/zero_bubble_builder.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "runtime/core/check.h"
#include "runtime/schedule/instruction_blocks.h"

namespace gpipe::schedule {
namespace {

enum class Pass { kForward, kBackwardInput, kBackwardWeight };

struct Op {
  Pass pass;
  int micro_batch;
};

constexpr long long kNever = std::numeric_limits<long long>::max();

// One stage of the unit-cost simulation. F, B and W each go in micro-batch order, so three
// counters say what is done; the end times let neighbours see when an input has arrived.
struct StageState {
  int forwarded = 0;  // F done (or running) for micro-batches 0..forwarded-1
  int backwarded = 0;
  int weighted = 0;
  long long free_at = 0;
  std::vector<long long> forward_end;  // per micro-batch; kNever until it runs
  std::vector<long long> backward_end;
  std::vector<Op> ops;  // in the order the stage runs them
};

// ZB-H2's order: the unit-cost list scheduler the header describes, capped at
// ZeroBubbleLiveCap(kH2, s, K) micro-batches held on stage s.
class ListScheduler {
 public:
  ListScheduler(int stages, int micro_batches)
      : stages_(stages), micro_batches_(micro_batches), state_(stages) {
    for (StageState& stage : state_) {
      stage.forward_end.assign(micro_batches, kNever);
      stage.backward_end.assign(micro_batches, kNever);
      stage.ops.reserve(3 * static_cast<size_t>(micro_batches));
    }
  }

  // Runs the simulation to the end; afterwards ops(s) is stage s's order.
  void Run() {
    // Only stages whose situation changed at time t can start something at t: those whose op
    // just ended and the neighbours that op fed. Visiting only them keeps the cost
    // proportional to the number of ops, not to stages * makespan.
    std::vector<int> candidates(stages_);
    for (int s = 0; s < stages_; ++s) candidates[s] = s;
    std::vector<char> queued(stages_, 0);
    int remaining = stages_;  // stages with W left to run
    for (long long t = 0; remaining > 0; ++t) {
      std::vector<int> started;
      for (int s : candidates) {
        if (TryStart(s, t)) started.push_back(s);
      }
      GPIPE_CHECK(!started.empty()) << "zero-bubble list scheduler stalled at time " << t;
      candidates.clear();
      for (int s : started) {
        const StageState& stage = state_[s];
        const Pass pass = stage.ops.back().pass;
        if (pass == Pass::kBackwardWeight && stage.weighted == micro_batches_) --remaining;
        Queue(s, candidates, queued);
        if (pass == Pass::kForward && s + 1 < stages_) Queue(s + 1, candidates, queued);
        if (pass == Pass::kBackwardInput && s > 0) Queue(s - 1, candidates, queued);
      }
      for (int s : candidates) queued[s] = 0;
    }
  }

  const std::vector<Op>& ops(int stage) const { return state_[stage].ops; }

 private:
  static void Queue(int stage, std::vector<int>& candidates, std::vector<char>& queued) {
    if (queued[stage]) return;
    queued[stage] = 1;
    candidates.push_back(stage);
  }

  // Starts stage s's highest-priority ready op at time t; false when none is ready.
  bool TryStart(int s, long long t) {
    StageState& stage = state_[s];
    if (stage.free_at > t) return false;
    const int m_b = stage.backwarded;
    const bool b_ready = m_b < stage.forwarded && stage.forward_end[m_b] <= t &&
                         (s == stages_ - 1 || state_[s + 1].backward_end[m_b] <= t);
    if (b_ready) return Start(stage, {Pass::kBackwardInput, m_b}, t);
    const int m_f = stage.forwarded;
    const bool f_ready =
        m_f < micro_batches_ && (s == 0 || state_[s - 1].forward_end[m_f] <= t) &&
        m_f - stage.weighted < ZeroBubbleLiveCap(ZeroBubbleVariant::kH2, s, stages_);
    if (f_ready) return Start(stage, {Pass::kForward, m_f}, t);
    if (stage.weighted < stage.backwarded) {  // a B ends before the next op can start
      return Start(stage, {Pass::kBackwardWeight, stage.weighted}, t);
    }
    return false;
  }

  static bool Start(StageState& stage, Op op, long long t) {
    const long long end = t + 1;
    switch (op.pass) {
      case Pass::kForward:
        stage.forward_end[stage.forwarded++] = end;
        break;
      case Pass::kBackwardInput:
        stage.backward_end[stage.backwarded++] = end;
        break;
      case Pass::kBackwardWeight:
        ++stage.weighted;
        break;
    }
    stage.free_at = end;
    stage.ops.push_back(op);
    return true;
  }

  const int stages_;
  const int micro_batches_;
  std::vector<StageState> state_;
};

// ZB-H1 on stage s: 1F1B's order of F and B (warm-up min(K-s-1, M) forwards, then one F and one
// B while forwards remain, then the remaining B's), with W(j - s) right after B(j) once j >= s
// and the last s W's at the end.
std::vector<Op> HandCraftedH1Order(int stage, int stages, int micro_batches) {
  const int warm_up = std::min(stages - stage - 1, micro_batches);
  std::vector<Op> ops;
  ops.reserve(3 * static_cast<size_t>(micro_batches));
  const auto backward = [&](int j) {
    ops.push_back({Pass::kBackwardInput, j});
    if (j - stage >= 0) ops.push_back({Pass::kBackwardWeight, j - stage});
  };
  for (int m = 0; m < warm_up; ++m) ops.push_back({Pass::kForward, m});
  for (int i = 0; i < micro_batches - warm_up; ++i) {
    ops.push_back({Pass::kForward, warm_up + i});
    backward(i);
  }
  for (int j = micro_batches - warm_up; j < micro_batches; ++j) backward(j);
  for (int m = std::max(micro_batches - stage, 0); m < micro_batches; ++m) {
    ops.push_back({Pass::kBackwardWeight, m});
  }
  return ops;
}

}  // namespace

int ZeroBubbleLiveCap(ZeroBubbleVariant variant, int stage, int stages) {
  return variant == ZeroBubbleVariant::kH1 ? stages : 2 * stages - 1 - stage;
}

Program BuildZeroBubbleProgram(ZeroBubbleVariant variant, int stages, int micro_batches) {
  GPIPE_CHECK(stages >= 1 && micro_batches >= 1)
      << stages << " stages, " << micro_batches << " micro-batches";
  std::vector<std::vector<Op>> orders(stages);
  if (variant == ZeroBubbleVariant::kH1) {
    for (int s = 0; s < stages; ++s) orders[s] = HandCraftedH1Order(s, stages, micro_batches);
  } else {
    ListScheduler scheduler(stages, micro_batches);
    scheduler.Run();
    for (int s = 0; s < stages; ++s) orders[s] = scheduler.ops(s);
  }

  const pb::Schedule kind =
      variant == ZeroBubbleVariant::kH1 ? pb::ZERO_BUBBLE_H1 : pb::ZERO_BUBBLE_H2;
  Program program = EmptyProgram(kind, stages, micro_batches, 1);
  const Topology topology{stages, 1};
  for (int s = 0; s < stages; ++s) {
    std::vector<Instruction>& out = program.stage_programs[s].instructions;
    out.reserve(7 * static_cast<size_t>(micro_batches) + 2);
    for (const Op& op : orders[s]) {
      switch (op.pass) {
        case Pass::kForward:
          AppendForward(topology, {s, 0}, op.micro_batch, out);
          break;
        case Pass::kBackwardInput:
          AppendBackward(topology, {s, 0}, op.micro_batch, BackwardPart::kInputGradient, out);
          break;
        case Pass::kBackwardWeight:
          out.push_back(BackwardWeight{op.micro_batch, 0});
          break;
      }
    }
    AppendStepEnd(/*forward_only=*/false, out);
  }
  return program;
}

}  // namespace gpipe::schedule

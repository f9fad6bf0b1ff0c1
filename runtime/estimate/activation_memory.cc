#include "runtime/estimate/activation_memory.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <variant>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/overloaded.h"
#include "runtime/core/status_macros.h"
#include "runtime/exec/micro_batch_plan.h"
#include "runtime/schedule/topology.h"

namespace gpipe {
namespace {

// What one (chunk, micro-batch) holds right now.
struct Held {
  int64_t input = 0;
  int64_t skip_inputs = 0;     // received skip connections (boundary)
  int64_t skip_grads_in = 0;   // received skip-connection gradients (boundary_grad)
  int64_t skip_grads_out = 0;  // skip-connection gradients awaiting their send (boundary_grad)
  int64_t saved = 0;
  int64_t output = 0;
  int64_t output_grad = 0;
  int64_t input_grad = 0;
  int64_t deferred = 0;  // activation bytes kept from BackwardInput to BackwardWeight
  bool offloaded = false;  // the input and skip inputs are in host memory (pipeline.offload)
};

class StageReplay {
 public:
  StageReplay(const schedule::Program& program, int stage, const std::vector<PartBytes>& parts,
              pb::Remat remat, pb::Offload offload, int lookahead)
      : program_(program),
        stage_(stage),
        parts_(parts),
        topology_(program.topology()),
        plan_(program.stage_programs[stage], program.chunks, program.micro_batches, remat, offload),
        lookahead_(lookahead) {}

  StageActivationMemory Run() {
    const auto& instructions = program_.stage_programs[stage_].instructions;
    for (size_t i = 0; i < instructions.size(); ++i) {
      if (std::optional<Receive> receive = ReceiveOf(instructions[i])) {
        receive->local = IsLocal(instructions[i]);
        receives_.push_back(*receive);
      }
    }
    PostUpTo();
    for (size_t i = 0; i < instructions.size(); ++i) {
      // Copies back start before the instruction runs (and take device memory from then on).
      for (const MicroBatchPlan::Slot& slot : plan_.RestoresBefore(i)) {
        Held& held = held_[Key(slot.chunk, slot.micro_batch)];
        if (!held.offloaded) continue;
        Restore(held);
      }
      Note();
      std::visit([this](const auto& op) { Apply(op); }, instructions[i]);
    }
    return peak_;
  }

 private:
  // A receive of the stage program, whose buffer is allocated when it is posted; a local
  // hand-off's (a V_SHAPE turn) is the tensor its send parked, counted at the send.
  struct Receive {
    int chunk = 0;
    bool activation = false;  // else a gradient
    bool local = false;
    int skip_layer = -1;  // a skip connection's, by join layer
  };
  // Whether a transfer instruction's peer is this stage's other chunk (a V_SHAPE turn).
  bool IsLocal(const schedule::Instruction& instruction) const {
    const schedule::StageChunk at{stage_, schedule::ChunkOf(instruction)};
    const auto peer_stage = [&](bool next) {
      return (next ? topology_.Next(at) : topology_.Previous(at)).stage;
    };
    return std::visit(
        Overloaded{[&](const schedule::RecvSkip& op) { return SkipIsLocal(op.skip_layer); },
                   [&](const schedule::SendSkip& op) { return SkipIsLocal(op.skip_layer); },
                   [&](const schedule::RecvSkipGrad& op) { return SkipIsLocal(op.skip_layer); },
                   [&](const schedule::SendSkipGrad& op) { return SkipIsLocal(op.skip_layer); },
                   [&](const schedule::RecvActivation&) { return peer_stage(false) == stage_; },
                   [&](const schedule::SendGrad&) { return peer_stage(false) == stage_; },
                   [&](const schedule::SendActivation&) { return peer_stage(true) == stage_; },
                   [&](const schedule::RecvGrad&) { return peer_stage(true) == stage_; },
                   [](const auto&) { return false; }},
        instruction);
  }
  // Whether both ends of a skip connection are chunks of this stage.
  bool SkipIsLocal(int join_layer) const {
    const schedule::SkipRoute* route = program_.FindSkip(join_layer);
    return route != nullptr && topology_.At(route->from).stage == stage_ &&
           topology_.At(route->to).stage == stage_;
  }
  int64_t SkipBytes(int chunk, int join_layer) const {
    const auto it = Part(chunk).skips.find(join_layer);
    return it == Part(chunk).skips.end() ? 0 : it->second;
  }
  static std::optional<Receive> ReceiveOf(const schedule::Instruction& instruction) {
    return std::visit(
        Overloaded{
            [](const schedule::RecvSkip& op) -> std::optional<Receive> {
              return Receive{.chunk = op.chunk, .activation = true, .skip_layer = op.skip_layer};
            },
            [](const schedule::RecvSkipGrad& op) -> std::optional<Receive> {
              return Receive{.chunk = op.chunk, .activation = false, .skip_layer = op.skip_layer};
            },
            [](const schedule::RecvActivation& op) -> std::optional<Receive> {
              return Receive{.chunk = op.chunk, .activation = true};
            },
            [](const schedule::RecvGrad& op) -> std::optional<Receive> {
              return Receive{.chunk = op.chunk, .activation = false};
            },
            [](const auto&) -> std::optional<Receive> { return std::nullopt; }},
        instruction);
  }

  const PartBytes& Part(int chunk) const { return parts_[topology_.VirtualStage({stage_, chunk})]; }
  int64_t Key(int chunk, int m) const {
    return static_cast<int64_t>(chunk) * program_.micro_batches + m;
  }

  // An offloaded micro-batch's copies back take device memory from their start.
  void Restore(Held& held) {
    held.offloaded = false;
    const int64_t bytes = held.input + held.skip_inputs;
    host_ -= bytes;
    now_.boundary += bytes;
  }

  void Note() {
    peak_.host = std::max(peak_.host, host_);
    peak_.boundary = std::max(peak_.boundary, now_.boundary);
    peak_.activation = std::max(peak_.activation, now_.activation);
    peak_.boundary_grad = std::max(peak_.boundary_grad, now_.boundary_grad);
    peak_.total = std::max(peak_.total, now_.boundary + now_.activation + now_.boundary_grad);
  }

  // Receive buffers are allocated when posted, up to `lookahead_` ahead of their instruction.
  void PostUpTo() {
    while (next_post_ < receives_.size() && posted_ahead_ < lookahead_) {
      const Receive& r = receives_[next_post_];
      if (r.local) {
        // Counted when its send parked it.
      } else if (r.skip_layer >= 0) {
        (r.activation ? now_.boundary : now_.boundary_grad) += SkipBytes(r.chunk, r.skip_layer);
      } else if (r.activation) {
        now_.boundary += Part(r.chunk).input;
      } else {
        now_.boundary_grad += Part(r.chunk).output;
      }
      ++next_post_;
      ++posted_ahead_;
    }
    Note();
  }

  // What a micro-batch instruction works on: its chunk's part and the micro-batch's holdings.
  struct Slot {
    const PartBytes& part;
    Held& held;
    schedule::StageChunk at;
    int micro_batch;
  };
  template <typename Op>
  Slot SlotOf(const Op& op) {
    return Slot{
        Part(op.chunk), held_[Key(op.chunk, op.micro_batch)], {stage_, op.chunk}, op.micro_batch};
  }

  // One handler per instruction (std::visit: a new instruction fails to compile until it has
  // one here, as in the executor). The step-level ones hold nothing per micro-batch.
  void Apply(const schedule::AllReduceGrads&) {}
  void Apply(const schedule::OptimizerStep&) {}
  void Apply(const schedule::ReportEval&) {}

  void Apply(const schedule::LoadMicroBatch& op) {
    const Slot s = SlotOf(op);
    if (topology_.IsFirst(s.at)) {
      s.held.input = s.part.input;
      now_.boundary += s.part.input;
    }
    Note();
  }

  void Apply(const schedule::RecvActivation& op) {
    const Slot s = SlotOf(op);
    s.held.input = s.part.input;  // the buffer posted earlier
    --posted_ahead_;
    PostUpTo();
    Note();
  }

  void Apply(const schedule::RecvGrad& op) {
    const Slot s = SlotOf(op);
    s.held.output_grad = s.part.output;
    --posted_ahead_;
    PostUpTo();
    Note();
  }

  void Apply(const schedule::RecvSkip& op) {
    const Slot s = SlotOf(op);
    s.held.skip_inputs += SkipBytes(op.chunk, op.skip_layer);  // posted earlier, or parked
    --posted_ahead_;
    PostUpTo();
    Note();
  }

  void Apply(const schedule::RecvSkipGrad& op) {
    const Slot s = SlotOf(op);
    s.held.skip_grads_in += SkipBytes(op.chunk, op.skip_layer);
    --posted_ahead_;
    PostUpTo();
    Note();
  }

  // A send completes at its instruction; a local hand-off is parked for the receiving chunk.
  void Apply(const schedule::SendSkip& op) {
    if (IsLocal(op)) now_.boundary += SkipBytes(op.chunk, op.skip_layer);
    Note();
  }

  void Apply(const schedule::SendSkipGrad& op) {
    Held& held = SlotOf(op).held;
    const int64_t bytes = SkipBytes(op.chunk, op.skip_layer);
    held.skip_grads_out -= bytes;
    // Sent at once, or parked for the producing chunk (a local hand-off).
    if (!IsLocal(op)) now_.boundary_grad -= bytes;
    Note();
  }

  void Apply(const schedule::Forward& op) {
    const Slot s = SlotOf(op);
    const PartBytes& part = s.part;
    Held& held = s.held;
    const bool keep = plan_.KeepsActivations(op.chunk, op.micro_batch);
    const int64_t built = plan_.forward_only() ? 0 : part.saved;
    now_.activation += built + part.output;  // built during the forward
    if (topology_.IsLast(s.at) && !plan_.forward_only()) {
      held.output_grad = part.loss_grad;
      now_.boundary_grad += part.loss_grad;
    }
    Note();
    // The output outlives the send when the last layer keeps it for backward.
    const int64_t output_kept = keep && part.output_saved ? part.output : 0;
    if (keep) {
      held.saved = part.saved + output_kept;
    } else {
      now_.activation -= built;
    }
    if (topology_.IsLast(s.at)) {
      now_.activation -= part.output - output_kept;  // the loss consumed it
    } else {
      held.output = part.output - output_kept;  // freed by the send
    }
    if (plan_.forward_only()) {
      now_.boundary -= held.input + held.skip_inputs;
      held.input = 0;
      held.skip_inputs = 0;
    }
    if (plan_.Offloads(op.chunk, op.micro_batch)) {
      held.offloaded = true;
      const int64_t bytes = held.input + held.skip_inputs;
      now_.boundary -= bytes;
      host_ += bytes;
      peak_.offloaded += bytes;
    }
    Note();
  }

  void Apply(const schedule::SendActivation& op) {
    Held& held = SlotOf(op).held;
    now_.activation -= held.output;
    held.output = 0;
    if (IsLocal(op)) {  // parked for the next chunk as its input
      now_.boundary += Part(topology_.Next({stage_, op.chunk}).chunk).input;
    }
    Note();
  }

  void Apply(const schedule::Backward& op) { Backpropagate(SlotOf(op), /*split=*/false); }
  void Apply(const schedule::BackwardInput& op) { Backpropagate(SlotOf(op), /*split=*/true); }

  // Backward, or with `split` its input half (BackwardInput).
  void Backpropagate(const Slot& s, bool split) {
    const PartBytes& part = s.part;
    Held& held = s.held;
    // Taken back at the backward itself when no instruction came before it.
    if (held.offloaded) Restore(held);
    if (held.saved == 0) {  // re-materialization rebuilds them
      held.saved = part.saved + (part.output_saved ? part.output : 0);
      now_.activation += held.saved;
    }
    if (split) {  // what the weight half will read, built up during the backward
      held.deferred = part.deferred;
      now_.activation += part.deferred;
    }
    // The gradients of the skip inputs (to send back) may be formed while the output gradient
    // and the received skip gradients are still held: counted from the start of the pass, those
    // freed at its end, so the prediction bounds the peak from above.
    for (const schedule::SkipRoute& route : program_.skips) {
      if (route.to != topology_.VirtualStage(s.at)) continue;
      const int64_t bytes = SkipBytes(s.at.chunk, route.layer);
      held.skip_grads_out += bytes;
      now_.boundary_grad += bytes;
    }
    Note();
    // Everything else of the backward is freed as it goes: the output gradient as soon as the
    // last layer has used it, before the input gradient becomes a boundary tensor.
    now_.activation -= held.saved;
    held.saved = 0;
    if (!split || !part.output_grad_deferred) {
      now_.boundary_grad -= held.output_grad;
      held.output_grad = 0;
    }
    if (!topology_.IsFirst(s.at)) {
      held.input_grad = part.input;
      now_.boundary_grad += part.input;
    }
    Note();
    if (!split || !part.input_deferred) {
      now_.boundary -= held.input;
      held.input = 0;
    }
    // The skip inputs and the received skip gradients are consumed by the pass.
    now_.boundary -= held.skip_inputs;
    held.skip_inputs = 0;
    now_.boundary_grad -= held.skip_grads_in;
    held.skip_grads_in = 0;
    Note();
  }

  void Apply(const schedule::BackwardWeight& op) {
    Held& held = SlotOf(op).held;
    now_.activation -= held.deferred;
    held.deferred = 0;
    now_.boundary_grad -= held.output_grad;
    held.output_grad = 0;
    now_.boundary -= held.input;
    held.input = 0;
    Note();
  }

  void Apply(const schedule::SendGrad& op) {
    Held& held = SlotOf(op).held;
    now_.boundary_grad -= held.input_grad;
    held.input_grad = 0;
    if (IsLocal(op)) {  // parked for the previous chunk as its output gradient
      now_.boundary_grad += Part(topology_.Previous({stage_, op.chunk}).chunk).output;
    }
    Note();
  }

  const schedule::Program& program_;
  const int stage_;
  const std::vector<PartBytes>& parts_;
  const schedule::Topology topology_;
  const MicroBatchPlan plan_;
  const int lookahead_;
  std::vector<Receive> receives_;  // in program order
  size_t next_post_ = 0;
  int posted_ahead_ = 0;
  absl::flat_hash_map<int64_t, Held> held_;
  StageActivationMemory now_;
  StageActivationMemory peak_;
  int64_t host_ = 0;  // offloaded stage inputs in host memory
};

}  // namespace

std::vector<StageActivationMemory> PredictActivationMemory(const schedule::Program& program,
                                                           const std::vector<PartBytes>& parts,
                                                           pb::Remat remat, pb::Offload offload,
                                                           int recv_lookahead) {
  std::vector<StageActivationMemory> out;
  for (int s = 0; s < program.stages; ++s) {
    out.push_back(StageReplay(program, s, parts, remat, offload, recv_lookahead).Run());
  }
  return out;
}

}  // namespace gpipe

// The pipeline instruction set: what one stage does, in order, during one training step.
//
// Instructions are small values with no tensors or devices in them (DeepSpeed's schedule
// style). A stage's executor dispatches them with std::visit, so adding a kind without a
// handler is a compile error. Each comment says what the instruction roughly does and what it
// pairs with on the neighbouring stage.
#ifndef GPIPE_RUNTIME_SCHEDULE_INSTRUCTION_H_
#define GPIPE_RUNTIME_SCHEDULE_INSTRUCTION_H_

#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace gpipe::schedule {

// First stage: fetch micro-batch m's inputs. Last stage: fetch its targets. No pairing.
struct LoadMicroBatch {
  int micro_batch = 0;
  int chunk = 0;
  bool operator==(const LoadMicroBatch&) const = default;
};
// Receive micro-batch m's input activation from stage s-1. Pairs with its SendActivation(m).
struct RecvActivation {
  int micro_batch = 0;
  int chunk = 0;
  bool operator==(const RecvActivation&) const = default;
};
// Run the stage's layers forward on micro-batch m (the last stage also computes the loss and,
// when training, its gradient). Needs m's input: LoadMicroBatch or RecvActivation before it.
struct Forward {
  int micro_batch = 0;
  int chunk = 0;
  bool operator==(const Forward&) const = default;
};
// Send micro-batch m's output activation to stage s+1. Pairs with its RecvActivation(m).
struct SendActivation {
  int micro_batch = 0;
  int chunk = 0;
  bool operator==(const SendActivation&) const = default;
};
// Receive dL/d(output) of micro-batch m from stage s+1. Pairs with its SendGrad(m).
struct RecvGrad {
  int micro_batch = 0;
  int chunk = 0;
  bool operator==(const RecvGrad&) const = default;
};
// Backpropagate micro-batch m through the stage (recomputing its forward first under
// re-materialization), accumulating parameter gradients. Needs Forward(m) and, except on the
// last stage, RecvGrad(m).
struct Backward {
  int micro_batch = 0;
  int chunk = 0;
  bool operator==(const Backward&) const = default;
};
// Zero-bubble split of Backward, part B: dL/d(input) of micro-batch m through the stage
// (recomputing its forward first under re-materialization). Layers that split their backward
// defer their parameter gradients to BackwardWeight(m); layers that cannot split accumulate them
// here. Needs what Backward needs. Unblocks SendGrad(m).
struct BackwardInput {
  int micro_batch = 0;
  int chunk = 0;
  bool operator==(const BackwardInput&) const = default;
};
// Zero-bubble split of Backward, part W: the parameter gradients BackwardInput(m) deferred,
// accumulated. Needs BackwardInput(m); no pairing. A micro-batch uses either Backward or
// BackwardInput + BackwardWeight.
struct BackwardWeight {
  int micro_batch = 0;
  int chunk = 0;
  bool operator==(const BackwardWeight&) const = default;
};
// Send dL/d(input) of micro-batch m to stage s-1. Pairs with its RecvGrad(m).
struct SendGrad {
  int micro_batch = 0;
  int chunk = 0;
  bool operator==(const SendGrad&) const = default;
};
// Skip connections across stages (plan: skip_add, skip_concat). Each names the join layer
// `skip_layer` (its index in model.layers) that reads the output of an earlier layer on another
// virtual stage (Program::skips has the route). The tensor goes straight from the stage that
// computes it to the stage that reads it, and its gradient straight back.
//
// Send the output the join layer `skip_layer` reads, computed by Forward(m) of this chunk, to the
// join's stage. Pairs with its RecvSkip(m).
struct SendSkip {
  int micro_batch = 0;
  int chunk = 0;
  int skip_layer = 0;
  bool operator==(const SendSkip&) const = default;
};
// Receive the skip input of join layer `skip_layer` for micro-batch m; Forward(m) of this chunk
// needs it. Pairs with its SendSkip(m).
struct RecvSkip {
  int micro_batch = 0;
  int chunk = 0;
  int skip_layer = 0;
  bool operator==(const RecvSkip&) const = default;
};
// Send the gradient of the skip input of join layer `skip_layer`, produced by this chunk's
// Backward(m) (or BackwardInput(m)), back to the stage that computed it. Pairs with its
// RecvSkipGrad(m).
struct SendSkipGrad {
  int micro_batch = 0;
  int chunk = 0;
  int skip_layer = 0;
  bool operator==(const SendSkipGrad&) const = default;
};
// Receive the gradient of the output this chunk sent for join layer `skip_layer`; this chunk's
// Backward(m) (or BackwardInput(m)) adds it in. Pairs with its SendSkipGrad(m).
struct RecvSkipGrad {
  int micro_batch = 0;
  int chunk = 0;
  int skip_layer = 0;
  bool operator==(const RecvSkipGrad&) const = default;
};
// Sum this stage's gradients across data-parallel replicas (no-op with one replica).
struct AllReduceGrads {
  bool operator==(const AllReduceGrads&) const = default;
};
// Gradient-sync barrier with rank 0 (report, then rank 0's apply/skip decision), then the
// optimizer update and zeroed gradients. Last instruction of every stage's step.
struct OptimizerStep {
  bool operator==(const OptimizerStep&) const = default;
};

// Forward-only (EVAL) programs end with this instead of AllReduceGrads, OptimizerStep: report
// the step's loss (last stage) to rank 0 through the same gate; nothing is updated.
struct ReportEval {
  bool operator==(const ReportEval&) const = default;
};

using Instruction =
    std::variant<LoadMicroBatch, RecvActivation, Forward, SendActivation, RecvGrad, Backward,
                 BackwardInput, BackwardWeight, SendGrad, SendSkip, RecvSkip, SendSkipGrad,
                 RecvSkipGrad, AllReduceGrads, OptimizerStep, ReportEval>;

// "Forward(mb=3)", "OptimizerStep"; chunk shown only when non-zero: "Forward(mb=3, chunk=1)";
// the skip kinds name their join layer: "RecvSkip(mb=3, layer=9)".
std::string ToString(const Instruction& instruction);

// The micro-batch an instruction works on; nullopt for the step-level ones (AllReduceGrads,
// OptimizerStep, ReportEval).
std::optional<int> MicroBatchOf(const Instruction& instruction);

// The virtual chunk an instruction works on (0 for the step-level ones).
int ChunkOf(const Instruction& instruction);

// The join layer a skip instruction carries; nullopt for every other kind.
std::optional<int> SkipLayerOf(const Instruction& instruction);

// Instructions of one stage for one step, in execution order.
struct StageProgram {
  int stage = 0;
  std::vector<Instruction> instructions;
};

}  // namespace gpipe::schedule

#endif  // GPIPE_RUNTIME_SCHEDULE_INSTRUCTION_H_

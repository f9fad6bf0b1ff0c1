#include "runtime/schedule/program.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gpipe::schedule {
namespace {

using Kind = pb::InstructionProto::Kind;

// One overload per instruction: a new instruction without a wire kind does not compile.
Kind KindOfOp(const LoadMicroBatch&) { return pb::InstructionProto::LOAD_MICRO_BATCH; }
Kind KindOfOp(const RecvActivation&) { return pb::InstructionProto::RECV_ACTIVATION; }
Kind KindOfOp(const Forward&) { return pb::InstructionProto::FORWARD; }
Kind KindOfOp(const SendActivation&) { return pb::InstructionProto::SEND_ACTIVATION; }
Kind KindOfOp(const RecvGrad&) { return pb::InstructionProto::RECV_GRAD; }
Kind KindOfOp(const Backward&) { return pb::InstructionProto::BACKWARD; }
Kind KindOfOp(const BackwardInput&) { return pb::InstructionProto::BACKWARD_INPUT; }
Kind KindOfOp(const BackwardWeight&) { return pb::InstructionProto::BACKWARD_WEIGHT; }
Kind KindOfOp(const SendGrad&) { return pb::InstructionProto::SEND_GRAD; }
Kind KindOfOp(const SendSkip&) { return pb::InstructionProto::SEND_SKIP; }
Kind KindOfOp(const RecvSkip&) { return pb::InstructionProto::RECV_SKIP; }
Kind KindOfOp(const SendSkipGrad&) { return pb::InstructionProto::SEND_SKIP_GRAD; }
Kind KindOfOp(const RecvSkipGrad&) { return pb::InstructionProto::RECV_SKIP_GRAD; }
Kind KindOfOp(const AllReduceGrads&) { return pb::InstructionProto::ALL_REDUCE_GRADS; }
Kind KindOfOp(const OptimizerStep&) { return pb::InstructionProto::OPTIMIZER_STEP; }
Kind KindOfOp(const ReportEval&) { return pb::InstructionProto::REPORT_EVAL; }

Kind KindOf(const Instruction& instruction) {
  return std::visit([](const auto& op) { return KindOfOp(op); }, instruction);
}

template <typename T>
Instruction MakeMicroBatchInstruction(int micro_batch, int chunk) {
  T op;
  op.micro_batch = micro_batch;
  op.chunk = chunk;
  return op;
}

template <typename T>
Instruction MakeSkipInstruction(int micro_batch, int chunk, int skip_layer) {
  T op;
  op.micro_batch = micro_batch;
  op.chunk = chunk;
  op.skip_layer = skip_layer;
  return op;
}

bool IsSkipKind(Kind kind) {
  return kind == pb::InstructionProto::SEND_SKIP || kind == pb::InstructionProto::RECV_SKIP ||
         kind == pb::InstructionProto::SEND_SKIP_GRAD ||
         kind == pb::InstructionProto::RECV_SKIP_GRAD;
}

absl::StatusOr<Instruction> FromInstructionProto(const pb::InstructionProto& proto) {
  if (!proto.has_kind()) {
    return absl::InvalidArgumentError("has no kind (or one this build does not know)");
  }
  const Kind kind = proto.kind();
  const bool step_level = kind == pb::InstructionProto::ALL_REDUCE_GRADS ||
                          kind == pb::InstructionProto::OPTIMIZER_STEP ||
                          kind == pb::InstructionProto::REPORT_EVAL;
  if (step_level) {
    if (proto.has_micro_batch() || proto.chunk() != 0 || proto.has_skip_layer()) {
      return absl::InvalidArgumentError(
          absl::StrCat(pb::InstructionProto::Kind_Name(kind),
                       " is step-level and takes no micro_batch or chunk"));
    }
    if (kind == pb::InstructionProto::ALL_REDUCE_GRADS) return AllReduceGrads{};
    if (kind == pb::InstructionProto::REPORT_EVAL) return ReportEval{};
    return OptimizerStep{};
  }
  if (!proto.has_micro_batch()) {
    return absl::InvalidArgumentError(
        absl::StrCat(pb::InstructionProto::Kind_Name(kind), " has no micro_batch"));
  }
  const int m = proto.micro_batch();
  const int c = proto.chunk();
  if (m < 0) {
    return absl::InvalidArgumentError(absl::StrCat("micro_batch is ", m, "; it must be >= 0"));
  }
  if (c < 0) {
    return absl::InvalidArgumentError(absl::StrCat("chunk is ", c, "; it must be >= 0"));
  }
  if (IsSkipKind(kind) != proto.has_skip_layer()) {
    return absl::InvalidArgumentError(
        absl::StrCat(pb::InstructionProto::Kind_Name(kind),
                     IsSkipKind(kind) ? " has no skip_layer" : " takes no skip_layer"));
  }
  const int skip = proto.skip_layer();
  if (skip < 0) {
    return absl::InvalidArgumentError(absl::StrCat("skip_layer is ", skip, "; it must be >= 0"));
  }
  switch (kind) {
    case pb::InstructionProto::SEND_SKIP:
      return MakeSkipInstruction<SendSkip>(m, c, skip);
    case pb::InstructionProto::RECV_SKIP:
      return MakeSkipInstruction<RecvSkip>(m, c, skip);
    case pb::InstructionProto::SEND_SKIP_GRAD:
      return MakeSkipInstruction<SendSkipGrad>(m, c, skip);
    case pb::InstructionProto::RECV_SKIP_GRAD:
      return MakeSkipInstruction<RecvSkipGrad>(m, c, skip);
    case pb::InstructionProto::LOAD_MICRO_BATCH:
      return MakeMicroBatchInstruction<LoadMicroBatch>(m, c);
    case pb::InstructionProto::RECV_ACTIVATION:
      return MakeMicroBatchInstruction<RecvActivation>(m, c);
    case pb::InstructionProto::FORWARD:
      return MakeMicroBatchInstruction<Forward>(m, c);
    case pb::InstructionProto::SEND_ACTIVATION:
      return MakeMicroBatchInstruction<SendActivation>(m, c);
    case pb::InstructionProto::RECV_GRAD:
      return MakeMicroBatchInstruction<RecvGrad>(m, c);
    case pb::InstructionProto::BACKWARD:
      return MakeMicroBatchInstruction<Backward>(m, c);
    case pb::InstructionProto::BACKWARD_INPUT:
      return MakeMicroBatchInstruction<BackwardInput>(m, c);
    case pb::InstructionProto::BACKWARD_WEIGHT:
      return MakeMicroBatchInstruction<BackwardWeight>(m, c);
    case pb::InstructionProto::SEND_GRAD:
      return MakeMicroBatchInstruction<SendGrad>(m, c);
    case pb::InstructionProto::ALL_REDUCE_GRADS:
    case pb::InstructionProto::OPTIMIZER_STEP:
    case pb::InstructionProto::REPORT_EVAL:
      break;  // handled above
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown kind ", static_cast<int>(kind)));
}

}  // namespace

const SkipRoute* Program::FindSkip(int layer) const {
  for (const SkipRoute& route : skips) {
    if (route.layer == layer) return &route;
  }
  return nullptr;
}

std::string DescribeInstruction(const Program& program, int stage, int index) {
  std::string text = absl::StrCat("stage ", stage, ", instruction #", index);
  if (stage >= 0 && stage < static_cast<int>(program.stage_programs.size())) {
    const std::vector<Instruction>& instructions = program.stage_programs[stage].instructions;
    if (index >= 0 && index < static_cast<int>(instructions.size())) {
      absl::StrAppend(&text, " ", ToString(instructions[index]));
    }
  }
  return text;
}

pb::StageProgramProto ToProto(const StageProgram& program) {
  pb::StageProgramProto proto;
  proto.set_stage(program.stage);
  proto.mutable_instructions()->Reserve(static_cast<int>(program.instructions.size()));
  for (const Instruction& instruction : program.instructions) {
    pb::InstructionProto* out = proto.add_instructions();
    out->set_kind(KindOf(instruction));
    if (const std::optional<int> m = MicroBatchOf(instruction)) out->set_micro_batch(*m);
    if (const int chunk = ChunkOf(instruction); chunk != 0) out->set_chunk(chunk);
    if (const std::optional<int> skip = SkipLayerOf(instruction)) out->set_skip_layer(*skip);
  }
  return proto;
}

absl::StatusOr<StageProgram> FromProto(const pb::StageProgramProto& proto) {
  if (!proto.has_stage() || proto.stage() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "stage program: stage is ", proto.has_stage() ? absl::StrCat(proto.stage()) : "missing",
        "; it must be >= 0"));
  }
  StageProgram program;
  program.stage = proto.stage();
  program.instructions.reserve(proto.instructions_size());
  for (int i = 0; i < proto.instructions_size(); ++i) {
    absl::StatusOr<Instruction> instruction = FromInstructionProto(proto.instructions(i));
    if (!instruction.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("stage ", program.stage, ", instruction #", i,
                                                     ": ", instruction.status().message()));
    }
    program.instructions.push_back(*std::move(instruction));
  }
  return program;
}

}  // namespace gpipe::schedule

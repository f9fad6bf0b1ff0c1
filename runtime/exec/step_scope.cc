#include "runtime/exec/step_scope.h"

#include <variant>

#include "absl/strings/str_cat.h"
#include "runtime/core/overloaded.h"

namespace gpipe {
namespace {

std::optional<TraceKind> TraceKindOf(const schedule::Instruction& instruction) {
  using Kind = std::optional<TraceKind>;
  return std::visit(
      Overloaded{[](const schedule::LoadMicroBatch&) -> Kind { return TraceKind::kLoad; },
                 [](const schedule::Forward&) -> Kind { return TraceKind::kForward; },
                 [](const schedule::Backward&) -> Kind { return TraceKind::kBackward; },
                 [](const schedule::BackwardInput&) -> Kind { return TraceKind::kBackwardInput; },
                 [](const schedule::BackwardWeight&) -> Kind { return TraceKind::kBackwardWeight; },
                 [](const schedule::RecvActivation&) -> Kind { return TraceKind::kRecvActivation; },
                 [](const schedule::RecvGrad&) -> Kind { return TraceKind::kRecvGrad; },
                 [](const schedule::SendActivation&) -> Kind { return TraceKind::kSendActivation; },
                 [](const schedule::SendGrad&) -> Kind { return TraceKind::kSendGrad; },
                 [](const schedule::RecvSkip&) -> Kind { return TraceKind::kRecvSkip; },
                 [](const schedule::RecvSkipGrad&) -> Kind { return TraceKind::kRecvSkip; },
                 [](const schedule::SendSkip&) -> Kind { return TraceKind::kSendSkip; },
                 [](const schedule::SendSkipGrad&) -> Kind { return TraceKind::kSendSkip; },
                 [](const schedule::AllReduceGrads&) -> Kind { return TraceKind::kAllReduce; },
                 [](const schedule::OptimizerStep&) -> Kind { return std::nullopt; },
                 [](const schedule::ReportEval&) -> Kind { return std::nullopt; }},
      instruction);
}

}  // namespace

std::string StepScope::Where() const {
  return absl::StrCat(
      "rank ", config_.rank, ", stage ", config_.stage,
      config_.replicas > 1 ? absl::StrCat(", replica ", config_.replica) : std::string(), ", step ",
      command_.step(), ": ");
}

bool StepScope::Traced() const {
  return trace_ != nullptr && trace_->Records(command_.step(), command_.eval());
}

TraceEvent StepScope::EventAt(TraceKind kind) const {
  TraceEvent event;
  event.kind = kind;
  event.step = command_.step();
  event.eval = command_.eval();
  event.instruction = static_cast<int32_t>(position_);
  return event;
}

std::optional<TraceEvent> StepScope::InstructionEvent(
    const schedule::Instruction& instruction) const {
  const std::optional<TraceKind> kind = TraceKindOf(instruction);
  if (!kind.has_value()) return std::nullopt;
  TraceEvent event = EventAt(*kind);
  event.micro_batch = schedule::MicroBatchOf(instruction).value_or(-1);
  event.chunk = schedule::ChunkOf(instruction);
  switch (*kind) {
    case TraceKind::kRecvActivation:
    case TraceKind::kSendGrad:
      event.peer = config_.NeighbourRank(event.chunk, /*next=*/false);
      break;
    case TraceKind::kRecvGrad:
    case TraceKind::kSendActivation:
      event.peer = config_.NeighbourRank(event.chunk, /*next=*/true);
      break;
    case TraceKind::kRecvSkip:
    case TraceKind::kSendSkip:
      event.peer = config_.SkipPeerRank(*schedule::SkipLayerOf(instruction));
      break;
    default:
      break;
  }
  return event;
}

void StepScope::RecordTransfer(TraceKind kind, const TransferKey& key, int chunk, int peer,
                               int64_t bytes, int64_t posted_ns, int64_t done_ns) const {
  if (!Traced()) return;
  TraceEvent event = EventAt(kind);
  event.instruction = -1;
  event.micro_batch = key.micro_batch;
  event.chunk = chunk;
  event.peer = peer;
  event.bytes = bytes;
  event.begin_ns = posted_ns;
  event.end_ns = done_ns >= 0 ? done_ns : trace_->NowNs();
  trace_->Add(event);
}

}  // namespace gpipe

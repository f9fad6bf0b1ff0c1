#include "runtime/exec/step_scope.h"

#include "absl/strings/str_cat.h"

namespace gpipe {

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

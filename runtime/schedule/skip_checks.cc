#include "runtime/schedule/skip_checks.h"

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/schedule/stage_checks.h"

namespace gpipe::schedule {
namespace {

enum SkipKind { kSendSkip = 0, kRecvSkip = 1, kSendSkipGrad = 2, kRecvSkipGrad = 3 };

SkipKind KindOf(const Instruction& instruction) {
  if (std::holds_alternative<SendSkip>(instruction)) return kSendSkip;
  if (std::holds_alternative<RecvSkip>(instruction)) return kRecvSkip;
  if (std::holds_alternative<SendSkipGrad>(instruction)) return kSendSkipGrad;
  return kRecvSkipGrad;
}

Instruction Make(SkipKind kind, int m, int chunk, int layer) {
  switch (kind) {
    case kSendSkip:
      return SendSkip{m, chunk, layer};
    case kRecvSkip:
      return RecvSkip{m, chunk, layer};
    case kSendSkipGrad:
      return SendSkipGrad{m, chunk, layer};
    case kRecvSkipGrad:
      break;
  }
  return RecvSkipGrad{m, chunk, layer};
}

// The producer's end sends forward and receives the gradient; the join's end the other two.
bool AtProducer(SkipKind kind) { return kind == kSendSkip || kind == kRecvSkipGrad; }

// The instruction of (m, chunk) that this skip instruction must follow (sends) or precede
// (receives): Forward for the forward pair, the input-gradient pass for the gradient pair.
int AnchorIndex(SkipKind kind, const MicroBatchSteps& seen) {
  return kind == kSendSkip || kind == kRecvSkip ? seen.at(Step::kForward) : seen.input_gradient();
}

std::string AnchorName(SkipKind kind, int m, int chunk) {
  return kind == kSendSkip || kind == kRecvSkip
             ? ToString(Forward{m, chunk})
             : absl::StrCat(ToString(Backward{m, chunk}), " (or ",
                            ToString(BackwardInput{m, chunk}), ")");
}

}  // namespace

absl::Status NoteSkipInstruction(const Program& program, int stage, int index,
                                 const Instruction& instruction,
                                 const std::vector<MicroBatchSteps>& seen, SkipSteps& steps) {
  const int layer = *SkipLayerOf(instruction);
  const int m = *MicroBatchOf(instruction);
  const int chunk = ChunkOf(instruction);
  const SkipKind kind = KindOf(instruction);
  const SkipRoute* route = program.FindSkip(layer);
  if (route == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("no skip connection crosses stages into layer ", layer,
                     program.skips.empty() ? "; this model has none that do"
                                           : "; name the join layer of one of the routes"));
  }
  const Topology topology = program.topology();
  const int here = topology.VirtualStage({stage, chunk});
  const int end = AtProducer(kind) ? route->from : route->to;
  if (here != end) {
    const StageChunk at = topology.At(end);
    return absl::InvalidArgumentError(absl::StrCat(
        "layer ", layer, " reads the output of layer ", route->producer, " (virtual stage ",
        route->from, ") on virtual stage ", route->to, "; this instruction belongs on stage ",
        at.stage, at.chunk != 0 ? absl::StrCat(", chunk ", at.chunk) : "",
        ", not on virtual stage ", here));
  }
  if (program.forward_only() && (kind == kSendSkipGrad || kind == kRecvSkipGrad)) {
    return absl::InvalidArgumentError(
        "forward-only programs move no gradients: no SendSkipGrad or RecvSkipGrad");
  }
  const auto [it, inserted] = steps.index.try_emplace({kind, layer, chunk, m}, index);
  if (!inserted) {
    return absl::InvalidArgumentError(
        absl::StrCat("repeats instruction #", it->second, "; each skip transfer happens once"));
  }
  const MicroBatchSteps& done = seen[static_cast<size_t>(chunk) * program.micro_batches + m];
  const int anchor = AnchorIndex(kind, done);
  const bool is_send = kind == kSendSkip || kind == kSendSkipGrad;
  if (is_send && anchor < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sends before ", AnchorName(kind, m, chunk), " has produced the tensor"));
  }
  if (!is_send && anchor >= 0) {
    return absl::InvalidArgumentError(absl::StrCat("receives after ", AnchorName(kind, m, chunk),
                                                   " at instruction #", anchor,
                                                   ", which needs this tensor"));
  }
  return absl::OkStatus();
}

absl::Status CheckSkipsComplete(const Program& program, int stage,
                                const std::vector<MicroBatchSteps>& seen, const SkipSteps& steps) {
  const Topology topology = program.topology();
  for (const SkipRoute& route : program.skips) {
    for (const SkipKind kind : {kRecvSkip, kSendSkip, kRecvSkipGrad, kSendSkipGrad}) {
      if (program.forward_only() && (kind == kSendSkipGrad || kind == kRecvSkipGrad)) continue;
      const StageChunk at = topology.At(AtProducer(kind) ? route.from : route.to);
      if (at.stage != stage) continue;
      for (int m = 0; m < program.micro_batches; ++m) {
        if (steps.index.contains({kind, route.layer, at.chunk, m})) continue;
        const MicroBatchSteps& done =
            seen[static_cast<size_t>(at.chunk) * program.micro_batches + m];
        const int anchor = AnchorIndex(kind, done);
        const std::string needed_by =
            anchor >= 0 ? absl::StrCat(DescribeInstruction(program, stage, anchor), " needs it")
                        : absl::StrCat(AnchorName(kind, m, at.chunk), " needs it");
        const StageChunk peer = topology.At(AtProducer(kind) ? route.to : route.from);
        const bool forward = kind == kSendSkip || kind == kRecvSkip;
        return absl::InvalidArgumentError(absl::StrCat(
            "stage ", stage, ": ", ToString(Make(kind, m, at.chunk, route.layer)),
            " is missing: layer ", route.layer, " reads the output of layer ", route.producer,
            " across stages (", forward ? "the output" : "its gradient",
            kind == kSendSkip || kind == kSendSkipGrad ? " goes to stage " : " comes from stage ",
            peer.stage, "); ",
            kind == kSendSkip || kind == kSendSkipGrad ? absl::StrCat("the peer waits for it")
                                                       : needed_by));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace gpipe::schedule

#include "runtime/schedule/transfers.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"

namespace gpipe::schedule {
namespace {

struct Endpoint {
  TransferKind kind;
  bool is_send;
  StageChunk peer;  // the other end's stage and chunk
};

// The far end of a skip instruction's route: the join's virtual stage for the forward send and
// the gradient receive, the producer's for the other two. Null when no route has that layer
// (the stage checks refuse such an instruction before transfers are collected).
std::optional<Endpoint> SkipEndpointOf(const Program& program, const Instruction& instruction) {
  const std::optional<int> layer = SkipLayerOf(instruction);
  if (!layer) return std::nullopt;
  const SkipRoute* route = program.FindSkip(*layer);
  if (route == nullptr) return std::nullopt;
  const Topology topology = program.topology();
  const StageChunk producer = topology.At(route->from);
  const StageChunk join = topology.At(route->to);
  if (std::holds_alternative<SendSkip>(instruction)) {
    return Endpoint{TransferKind::kSkip, true, join};
  }
  if (std::holds_alternative<RecvSkip>(instruction)) {
    return Endpoint{TransferKind::kSkip, false, producer};
  }
  if (std::holds_alternative<SendSkipGrad>(instruction)) {
    return Endpoint{TransferKind::kSkipGrad, true, producer};
  }
  return Endpoint{TransferKind::kSkipGrad, false, join};
}

// What a transfer instruction at `at` does, or nullopt for other instructions.
std::optional<Endpoint> EndpointOf(const Program& program, StageChunk at,
                                   const Instruction& instruction) {
  const Topology topology = program.topology();
  if (SkipLayerOf(instruction)) return SkipEndpointOf(program, instruction);
  if (std::holds_alternative<SendActivation>(instruction)) {
    return Endpoint{TransferKind::kActivation, true, topology.Next(at)};
  }
  if (std::holds_alternative<RecvActivation>(instruction)) {
    return Endpoint{TransferKind::kActivation, false, topology.Previous(at)};
  }
  if (std::holds_alternative<SendGrad>(instruction)) {
    return Endpoint{TransferKind::kGrad, true, topology.Previous(at)};
  }
  if (std::holds_alternative<RecvGrad>(instruction)) {
    return Endpoint{TransferKind::kGrad, false, topology.Next(at)};
  }
  return std::nullopt;
}

// The instruction the other end of `end` must be, named as its own stage sees it.
std::string Counterpart(const Link& link, const TransferEnd& end, bool end_is_send,
                        const Program& program) {
  const Topology topology = program.topology();
  const int m = end.micro_batch;
  if (link.kind == TransferKind::kSkip || link.kind == TransferKind::kSkipGrad) {
    const SkipRoute* route = program.FindSkip(end.skip_layer);
    const int l = end.skip_layer;
    // The receiver's chunk, and the sender's: the route's other end.
    const bool forward = link.kind == TransferKind::kSkip;
    if (end_is_send) {
      return forward ? ToString(RecvSkip{m, end.chunk, l})
                     : ToString(RecvSkipGrad{m, end.chunk, l});
    }
    const int sender_chunk =
        route == nullptr ? 0 : topology.At(forward ? route->from : route->to).chunk;
    return forward ? ToString(SendSkip{m, sender_chunk, l})
                   : ToString(SendSkipGrad{m, sender_chunk, l});
  }
  if (end_is_send) {  // the receiver's instruction: chunk already in the receiver's terms
    return link.kind == TransferKind::kActivation ? ToString(RecvActivation{m, end.chunk})
                                                  : ToString(RecvGrad{m, end.chunk});
  }
  // The sender's instruction: translate the receiver's chunk back to the sender's.
  const StageChunk receiver{end.stage, end.chunk};
  if (link.kind == TransferKind::kActivation) {
    return ToString(SendActivation{m, topology.Previous(receiver).chunk});
  }
  return ToString(SendGrad{m, topology.Next(receiver).chunk});
}

bool SameItem(const TransferEnd& a, const TransferEnd& b) {
  return a.micro_batch == b.micro_batch && a.chunk == b.chunk && a.skip_layer == b.skip_layer;
}

bool Contains(const std::vector<TransferEnd>& ends, const TransferEnd& item) {
  return std::any_of(ends.begin(), ends.end(),
                     [&](const TransferEnd& e) { return SameItem(e, item); });
}

const char* Noun(TransferKind kind) {
  switch (kind) {
    case TransferKind::kActivation:
      return "activations";
    case TransferKind::kGrad:
      return "gradients";
    case TransferKind::kSkip:
      return "skip connections";
    case TransferKind::kSkipGrad:
      return "skip-connection gradients";
  }
  return "transfers";
}

}  // namespace

Transfers Transfers::Collect(const Program& program) {
  Transfers transfers;
  std::map<std::tuple<TransferKind, int, int>, int> link_ids;
  transfers.slots_.resize(program.stages);
  for (int stage = 0; stage < program.stages; ++stage) {
    const std::vector<Instruction>& instructions = program.stage_programs[stage].instructions;
    transfers.slots_[stage].resize(instructions.size());
    for (int i = 0; i < static_cast<int>(instructions.size()); ++i) {
      const StageChunk at{stage, ChunkOf(instructions[i])};
      const std::optional<Endpoint> endpoint = EndpointOf(program, at, instructions[i]);
      if (!endpoint) continue;
      const int from = endpoint->is_send ? stage : endpoint->peer.stage;
      const int to = endpoint->is_send ? endpoint->peer.stage : stage;
      auto [it, inserted] = link_ids.try_emplace({endpoint->kind, from, to},
                                                 static_cast<int>(transfers.links_.size()));
      if (inserted) {
        Link link;
        link.kind = endpoint->kind;
        link.from_stage = from;
        link.to_stage = to;
        transfers.links_.push_back(std::move(link));
      }
      Link& link = transfers.links_[it->second];
      // Name the item as the receiver does: a send's chunk becomes its peer's chunk.
      const int chunk = endpoint->is_send ? endpoint->peer.chunk : at.chunk;
      const TransferEnd end{stage, i, *MicroBatchOf(instructions[i]), chunk,
                            SkipLayerOf(instructions[i]).value_or(-1)};
      std::vector<TransferEnd>& ends = endpoint->is_send ? link.sends : link.recvs;
      transfers.slots_[stage][i] = {it->second, static_cast<int>(ends.size()), endpoint->is_send};
      ends.push_back(end);
    }
  }
  return transfers;
}

absl::Status Transfers::Check(const Program& program) const {
  for (const Link& link : links_) {
    const size_t n = std::max(link.sends.size(), link.recvs.size());
    for (size_t k = 0; k < n; ++k) {
      const bool has_send = k < link.sends.size();
      const bool has_recv = k < link.recvs.size();
      if (has_send && has_recv && SameItem(link.sends[k], link.recvs[k])) continue;
      // A receive whose item is never sent on this link.
      if (has_recv && !Contains(link.sends, link.recvs[k])) {
        const TransferEnd& recv = link.recvs[k];
        return absl::InvalidArgumentError(
            absl::StrCat(DescribeInstruction(program, recv.stage, recv.index), ": no matching ",
                         Counterpart(link, recv, false, program), " on stage ", link.from_stage,
                         "; this receive would wait forever"));
      }
      // A send whose item is never received on this link.
      if (has_send && !Contains(link.recvs, link.sends[k])) {
        const TransferEnd& send = link.sends[k];
        return absl::InvalidArgumentError(absl::StrCat(
            DescribeInstruction(program, send.stage, send.index), ": stage ", link.to_stage,
            " never receives it (no matching ", Counterpart(link, send, true, program), ")"));
      }
      // Both items exist on the other side, at other positions: the orders differ.
      const TransferEnd& recv = has_recv ? link.recvs[k] : link.recvs.back();
      const TransferEnd& send = has_send ? link.sends[k] : link.sends.back();
      return absl::InvalidArgumentError(
          absl::StrCat(DescribeInstruction(program, recv.stage, recv.index), ": receives ",
                       Noun(link.kind), " from stage ", link.from_stage,
                       " in a different order than they are sent: the send it meets is ",
                       DescribeInstruction(program, send.stage, send.index),
                       "; post receives in the order the sends are issued"));
    }
  }
  return absl::OkStatus();
}

absl::Status Transfers::CheckPerPeerOrder(const Program& program) const {
  // Every (sender, receiver) pair's sends in issue order and receives in post order, of both
  // kinds: link by link they are already paired (Check), so merging by instruction index gives
  // each side's order.
  struct End {
    int index;  // on its stage
    const Link* link;
    int position;  // on the link
  };
  std::map<std::pair<int, int>, std::pair<std::vector<End>, std::vector<End>>> pairs;
  for (const Link& link : links_) {
    auto& [sends, recvs] = pairs[{link.from_stage, link.to_stage}];
    for (size_t k = 0; k < link.sends.size(); ++k) {
      sends.push_back({link.sends[k].index, &link, static_cast<int>(k)});
    }
    for (size_t k = 0; k < link.recvs.size(); ++k) {
      recvs.push_back({link.recvs[k].index, &link, static_cast<int>(k)});
    }
  }
  const auto by_index = [](const End& a, const End& b) { return a.index < b.index; };
  for (auto& [stages, ends] : pairs) {
    // A stage's hand-off to itself (a V_SHAPE turn) is local: no transport pairs it.
    if (stages.first == stages.second) continue;
    auto& [sends, recvs] = ends;
    std::sort(sends.begin(), sends.end(), by_index);
    std::sort(recvs.begin(), recvs.end(), by_index);
    for (size_t n = 0; n < sends.size() && n < recvs.size(); ++n) {
      if (sends[n].link == recvs[n].link && sends[n].position == recvs[n].position) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          DescribeInstruction(program, stages.second, recvs[n].index), " is the receive number ", n,
          " stage ", stages.second, " posts from stage ", stages.first, ", but the send number ", n,
          " stage ", stages.first, " issues to it is ",
          DescribeInstruction(program, stages.first, sends[n].index),
          ": a transport that matches by issue order per pair of ranks (NCCL) would pair them"));
    }
  }
  return absl::OkStatus();
}

}  // namespace gpipe::schedule

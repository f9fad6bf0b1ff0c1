#include "runtime/schedule/receive_order.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>
#include <utility>

#include "runtime/schedule/transfers.h"

namespace gpipe::schedule {

std::vector<std::vector<int>> MatchReceivesToSends(Program& program) {
  const Transfers transfers = Transfers::Collect(program);
  // Per (sender, receiver) pair: the receiver's receive indices in the sender's send order.
  std::map<std::pair<int, int>, std::vector<std::pair<int, int>>> by_pair;  // (send idx, recv idx)
  for (const Link& link : transfers.links()) {
    if (link.from_stage == link.to_stage) continue;
    std::vector<std::pair<int, int>>& pairs = by_pair[{link.from_stage, link.to_stage}];
    if (link.kind == TransferKind::kSkip || link.kind == TransferKind::kSkipGrad) {
      // A skip receive meets the send of its own item (micro-batch, chunk, join layer), wherever
      // the two sit in their lists: one link may carry several routes, added per instruction.
      std::map<std::tuple<int, int, int>, int> send_of;
      for (const TransferEnd& send : link.sends) {
        send_of.emplace(std::make_tuple(send.micro_batch, send.chunk, send.skip_layer), send.index);
      }
      for (const TransferEnd& recv : link.recvs) {
        const auto it =
            send_of.find(std::make_tuple(recv.micro_batch, recv.chunk, recv.skip_layer));
        if (it != send_of.end()) pairs.emplace_back(it->second, recv.index);
      }
      continue;
    }
    // The pipeline's own links already pair in order (Transfers::Check): the n-th send meets the
    // n-th receive.
    const size_t n = std::min(link.sends.size(), link.recvs.size());
    for (size_t k = 0; k < n; ++k) pairs.emplace_back(link.sends[k].index, link.recvs[k].index);
  }
  // target[stage][old index] = the old index of the instruction it is placed before (itself when
  // it stays).
  std::vector<std::vector<int>> target(program.stages);
  for (int s = 0; s < program.stages; ++s) {
    target[s].resize(program.stage_programs[s].instructions.size());
    std::iota(target[s].begin(), target[s].end(), 0);
  }
  for (auto& [stages, pairs] : by_pair) {
    std::sort(pairs.begin(), pairs.end());  // the sender's issue order
    std::vector<int>& place = target[stages.second];
    int next = -1;
    for (auto it = pairs.rbegin(); it != pairs.rend(); ++it) {
      const int recv = it->second;
      if (next >= 0) place[recv] = std::min(place[recv], next);
      next = place[recv];
    }
  }
  std::vector<std::vector<int>> order(program.stages);
  for (int s = 0; s < program.stages; ++s) {
    std::vector<int>& old_of = order[s];
    old_of.resize(target[s].size());
    std::iota(old_of.begin(), old_of.end(), 0);
    // By the place each instruction goes before; a moved receive ahead of what it lands before,
    // moved ones among themselves in the peer's send order (which their own indices do not
    // give), so ties break by the place's chain: stable on (place, whether it moved, send order).
    std::vector<int> rank_in_sends(target[s].size(), 0);
    for (const auto& [stages, pairs] : by_pair) {
      if (stages.second != s) continue;
      for (size_t k = 0; k < pairs.size(); ++k)
        rank_in_sends[pairs[k].second] = static_cast<int>(k);
    }
    std::stable_sort(old_of.begin(), old_of.end(), [&](int a, int b) {
      if (target[s][a] != target[s][b]) return target[s][a] < target[s][b];
      const bool a_moved = target[s][a] != a;
      const bool b_moved = target[s][b] != b;
      if (a_moved != b_moved) return a_moved;
      return rank_in_sends[a] < rank_in_sends[b];
    });
    std::vector<Instruction>& instructions = program.stage_programs[s].instructions;
    std::vector<Instruction> reordered;
    reordered.reserve(instructions.size());
    for (int old : old_of) reordered.push_back(instructions[old]);
    instructions = std::move(reordered);
  }
  return order;
}

}  // namespace gpipe::schedule

#include "runtime/schedule/custom_program.h"

#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/core/status_macros.h"
#include "runtime/schedule/instruction_blocks.h"
#include "runtime/schedule/receive_order.h"
#include "runtime/schedule/schedule_shape.h"
#include "runtime/schedule/verifier.h"

namespace gpipe::schedule {
namespace {

// Where an action was written: its row (= rank) and position in the row's action list.
struct ActionRef {
  int row = -1;
  int position = -1;
  bool found() const { return row >= 0; }
};

absl::Status ActionError(const ActionTable& table, ActionRef ref, absl::string_view what) {
  const ActionRow& row = table[ref.row];
  return absl::InvalidArgumentError(
      absl::StrCat(DescribeAction(row, row.actions[ref.position]), ": ", what));
}

std::string Name(int stage, char letter, int micro_batch) {
  return absl::StrCat(stage, std::string(1, letter), micro_batch);
}

// The builders' pass for an action type.
ChunkPass PassOf(ActionType type) {
  switch (type) {
    case ActionType::kForward:
      return ChunkPass::kForward;
    case ActionType::kFullBackward:
      return ChunkPass::kBackward;
    case ActionType::kBackwardInput:
      return ChunkPass::kBackwardInput;
    case ActionType::kBackwardWeight:
      return ChunkPass::kBackwardWeight;
  }
  return ChunkPass::kForward;  // unreachable: -Wswitch covers every type
}

// Which rank runs each virtual stage, and the action that first names it.
struct StagePlacement {
  std::vector<int> rank_of;
  std::vector<ActionRef> owner;
};

// Every stage on exactly one rank, ids 0 ... V-1 all used, micro-batch ids in range.
absl::StatusOr<StagePlacement> RanksOfStages(const ActionTable& table, int micro_batches) {
  std::vector<ActionRef> owner;
  for (int r = 0; r < static_cast<int>(table.size()); ++r) {
    for (int p = 0; p < static_cast<int>(table[r].actions.size()); ++p) {
      const Action& action = table[r].actions[p];
      if (action.micro_batch >= micro_batches) {
        return ActionError(
            table, {r, p},
            absl::StrCat("micro-batch ", action.micro_batch,
                         " is out of range: pipeline.micro_batches is ", micro_batches,
                         ", so the ids are 0 ... ", micro_batches - 1));
      }
      if ((static_cast<long long>(action.stage) + 1) * micro_batches > kMaxStageMicroBatches) {
        return ActionError(table, {r, p},
                           absl::StrCat("stage ", action.stage, " x ", micro_batches,
                                        " micro-batches is more work than a program may hold (",
                                        kMaxStageMicroBatches, " stage micro-batches)"));
      }
      if (action.stage >= static_cast<int>(owner.size())) owner.resize(action.stage + 1);
      ActionRef& first = owner[action.stage];
      if (!first.found()) {
        first = {r, p};
      } else if (first.row != r) {
        const ActionRow& other = table[first.row];
        return ActionError(table, {r, p},
                           absl::StrCat("stage ", action.stage, " already runs on rank ", first.row,
                                        " (", DescribeAction(other, other.actions[first.position]),
                                        "); each virtual stage runs on exactly one rank"));
      }
    }
  }
  const int ranks = static_cast<int>(table.size());
  if (owner.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(table.front().source, ": the schedule holds no action on any rank"));
  }
  std::vector<int> rank_of(owner.size());
  for (int v = 0; v < static_cast<int>(owner.size()); ++v) {
    if (!owner[v].found()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the schedule names virtual stages up to ", owner.size() - 1, " but no row runs stage ",
          v, "; the stage ids must be 0 ... V-1, each on one rank"));
    }
    rank_of[v] = owner[v].row;
  }
  for (int r = 0; r < ranks; ++r) {
    if (table[r].actions.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          table[r].source, ": rank ", r, " has no actions; every rank runs at least one stage"));
    }
  }
  return StagePlacement{.rank_of = std::move(rank_of), .owner = std::move(owner)};
}

// The placement (LOOPED first, then V_SHAPE; with one chunk they coincide) under which virtual
// stage v runs on rank_of[v], or an error at the first stage that fits neither.
absl::StatusOr<pb::Placement> PlacementOf(const ActionTable& table, const StagePlacement& found) {
  const int ranks = static_cast<int>(table.size());
  const int stages = static_cast<int>(found.rank_of.size());
  int blamed = 0;  // the first stage that breaks the placement fitting longest
  for (const pb::Placement placement : {pb::LOOPED, pb::V_SHAPE}) {
    const Topology topology{ranks, std::max(1, stages / ranks), placement};
    int v = 0;
    while (v < stages && found.rank_of[v] == topology.At(v).stage) ++v;
    if (v == stages && stages % ranks == 0) return placement;
    blamed = std::max(blamed, std::min(v, stages - 1));
  }
  std::vector<std::string> where;
  for (int u = 0; u < stages; ++u) where.push_back(absl::StrCat(u, "->", found.rank_of[u]));
  return ActionError(
      table, found.owner[blamed],
      absl::StrCat("stage ", blamed, " runs on rank ", found.rank_of[blamed],
                   "; the schedule places its ", stages, " virtual stages on ", ranks,
                   " ranks as stage->rank ", absl::StrJoin(where, " "),
                   ", but the virtual stages must be a multiple of the ranks, placed LOOPED (rank "
                   "r holds r, r + ",
                   ranks, ", r + ", 2 * ranks, ", ...) or V_SHAPE (rank r holds r, ", 2 * ranks - 1,
                   " - r, ", 2 * ranks, " + r, ...)"));
}

// Per (stage, micro-batch): each of F, B, I, W at most once, in a valid order on its rank, and
// the forward and a backward (B, or I then W) all present.
absl::Status CheckActionOrder(const ActionTable& table, int stages, int micro_batches) {
  struct Seen {
    ActionRef forward, full, input, weight;
  };
  std::vector<Seen> seen(static_cast<size_t>(stages) * micro_batches);
  for (int r = 0; r < static_cast<int>(table.size()); ++r) {
    for (int p = 0; p < static_cast<int>(table[r].actions.size()); ++p) {
      const Action& a = table[r].actions[p];
      Seen& s = seen[static_cast<size_t>(a.stage) * micro_batches + a.micro_batch];
      ActionRef* slot = nullptr;
      switch (a.type) {
        case ActionType::kForward:
          slot = &s.forward;
          break;
        case ActionType::kFullBackward:
          slot = &s.full;
          break;
        case ActionType::kBackwardInput:
          slot = &s.input;
          break;
        case ActionType::kBackwardWeight:
          slot = &s.weight;
          break;
      }
      if (slot->found()) {
        return ActionError(table, {r, p},
                           absl::StrCat(ToString(a), " is scheduled twice (first as action ",
                                        table[r].actions[slot->position].index,
                                        "); every forward and backward runs once a step"));
      }
      const std::string forward = Name(a.stage, 'F', a.micro_batch);
      const std::string input = Name(a.stage, 'I', a.micro_batch);
      if (a.type != ActionType::kForward && !s.forward.found()) {
        return ActionError(table, {r, p},
                           absl::StrCat("comes before its forward ", forward,
                                        " (a backward needs the forward's activations)"));
      }
      if ((a.type == ActionType::kFullBackward && s.input.found()) ||
          (a.type == ActionType::kBackwardInput && s.full.found())) {
        return ActionError(table, {r, p},
                           absl::StrCat("micro-batch ", a.micro_batch, " of stage ", a.stage,
                                        " has both a whole backward (B) and a split one (I then "
                                        "W); use one"));
      }
      if (a.type == ActionType::kBackwardWeight && !s.input.found()) {
        return ActionError(
            table, {r, p},
            s.full.found()
                ? absl::StrCat("micro-batch ", a.micro_batch, " of stage ", a.stage,
                               " already ran its whole backward; W follows an I, not a B")
                : absl::StrCat("comes before its input gradient ", input,
                               " (W computes what I defers): move it after ", input));
      }
      *slot = {r, p};
    }
  }
  for (int v = 0; v < stages; ++v) {
    for (int m = 0; m < micro_batches; ++m) {
      const Seen& s = seen[static_cast<size_t>(v) * micro_batches + m];
      if (!s.forward.found()) {
        return absl::InvalidArgumentError(absl::StrCat("micro-batch ", m, " of stage ", v,
                                                       " is never forwarded: add ", Name(v, 'F', m),
                                                       " to the row that runs stage ", v));
      }
      if (s.input.found() && !s.weight.found()) {
        return ActionError(table, s.input,
                           absl::StrCat("its weight gradient ", Name(v, 'W', m),
                                        " is never scheduled: add it after the I"));
      }
      if (!s.full.found() && !s.input.found()) {
        const std::string backward =
            absl::StrCat(Name(v, 'B', m), ", or ", Name(v, 'I', m), " then ", Name(v, 'W', m));
        // Blame the action that waits for it: the previous stage's backward, which exists (stages
        // are checked in order); stage 0's own forward otherwise.
        if (v > 0) {
          const Seen& previous = seen[static_cast<size_t>(v - 1) * micro_batches + m];
          const ActionRef waiting = previous.full.found() ? previous.full : previous.input;
          if (waiting.found()) {
            return ActionError(table, waiting,
                               absl::StrCat("micro-batch ", m, "'s gradient for stage ", v - 1,
                                            " comes from stage ", v, ", whose backward (", backward,
                                            ") is never scheduled"));
          }
        }
        return ActionError(table, s.forward,
                           absl::StrCat("micro-batch ", m, " is forwarded on stage ", v,
                                        " but its backward (", backward, ") is never scheduled"));
      }
    }
  }
  return absl::OkStatus();
}

// Rewrites the verifier's "stage S, instruction #I" into the action that emitted I.
std::string TranslateVerifierMessage(const std::string& message, const ActionTable& table,
                                     const std::vector<std::vector<int>>& action_of) {
  static const std::regex kInstruction(R"(stage (\d+), instruction #(\d+))");
  std::string out;
  std::string first;
  auto begin = std::sregex_iterator(message.begin(), message.end(), kInstruction);
  size_t last = 0;
  for (auto it = begin; it != std::sregex_iterator(); ++it) {
    const std::smatch& match = *it;
    out.append(message, last, match.position(0) - last);
    last = match.position(0) + match.length(0);
    const int stage = std::stoi(match[1].str());
    const int index = std::stoi(match[2].str());
    std::string replacement = match.str(0);
    if (stage >= 0 && stage < static_cast<int>(action_of.size()) && index >= 0 &&
        index < static_cast<int>(action_of[stage].size()) && action_of[stage][index] >= 0) {
      const ActionRow& row = table[stage];
      replacement = absl::StrCat(DescribeAction(row, row.actions[action_of[stage][index]]),
                                 " [rank ", stage, ", instruction #", index, "]");
      if (first.empty()) first = DescribeAction(row, row.actions[action_of[stage][index]]);
    }
    out += replacement;
  }
  out.append(message, last, std::string::npos);
  // Lead with the first action named, unless the message already does.
  if (first.empty() || absl::StartsWith(out, first)) return out;
  return absl::StrCat(first, ": ", out);
}

}  // namespace

absl::StatusOr<Program> CompileCustomProgram(const ActionTable& table, int micro_batches) {
  if (table.empty()) {
    return absl::InvalidArgumentError("the CUSTOM schedule has no rows; write one per rank");
  }
  if (micro_batches < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline.micro_batches is ", micro_batches, "; it must be >= 1"));
  }
  ASSIGN_OR_RETURN(const StagePlacement found, RanksOfStages(table, micro_batches));
  ASSIGN_OR_RETURN(const pb::Placement placement, PlacementOf(table, found));
  const int ranks = static_cast<int>(table.size());
  const int stages = static_cast<int>(found.rank_of.size());
  RETURN_IF_ERROR(CheckScheduleShape(pb::CUSTOM, ranks, micro_batches, stages / ranks));
  RETURN_IF_ERROR(CheckActionOrder(table, stages, micro_batches));

  Program program = EmptyProgram(pb::CUSTOM, ranks, micro_batches, stages / ranks, placement);
  const Topology topology = program.topology();
  // action_of[r][i]: the position in row r of the action that emitted instruction i; -1 for the
  // step's end.
  std::vector<std::vector<int>> action_of(ranks);
  for (int r = 0; r < ranks; ++r) {
    std::vector<Instruction>& out = program.stage_programs[r].instructions;
    for (int p = 0; p < static_cast<int>(table[r].actions.size()); ++p) {
      const Action& a = table[r].actions[p];
      AppendChunkOp(topology, r,
                    {.pass = PassOf(a.type),
                     .chunk = topology.At(a.stage).chunk,
                     .micro_batch = a.micro_batch},
                    out);
      action_of[r].resize(out.size(), p);
    }
    AppendStepEnd(/*forward_only=*/false, out);
    action_of[r].resize(out.size(), -1);
  }
  // Derive a receive order that NCCL's per-pair matching accepts; the verifier then proves it.
  const std::vector<std::vector<int>> moved = MatchReceivesToSends(program);
  for (int r = 0; r < ranks; ++r) {
    std::vector<int> reordered;
    reordered.reserve(moved[r].size());
    for (int old : moved[r]) reordered.push_back(action_of[r][old]);
    action_of[r] = std::move(reordered);
  }
  if (absl::Status verified = VerifyProgram(program, OpCosts{}).status(); !verified.ok()) {
    return absl::InvalidArgumentError(
        TranslateVerifierMessage(std::string(verified.message()), table, action_of));
  }
  return program;
}

absl::StatusOr<ActionTable> ActionTableFromProto(const pb::CustomSchedule& custom) {
  ActionTable table;
  table.reserve(custom.ranks_size());
  for (int r = 0; r < custom.ranks_size(); ++r) {
    ASSIGN_OR_RETURN(
        ActionRow row,
        ParseActionText(custom.ranks(r).actions(), absl::StrCat("pipeline.custom.ranks[", r, "]")));
    table.push_back(std::move(row));
  }
  return table;
}

pb::CustomSchedule ActionTableToProto(const ActionTable& table) {
  pb::CustomSchedule custom;
  for (const ActionRow& row : table) {
    std::vector<std::string> actions;
    actions.reserve(row.actions.size());
    for (const Action& action : row.actions) actions.push_back(ToString(action));
    custom.add_ranks()->set_actions(absl::StrJoin(actions, " "));
  }
  return custom;
}

}  // namespace gpipe::schedule

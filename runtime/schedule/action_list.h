// Action lists: a schedule written as one row of actions per rank, in PyTorch's pipelining
// compute-schedule grammar (what torch.distributed.pipelining's _load_csv reads). An action is
// `<stage>F<mb>` (forward), `<stage>B<mb>` (whole backward), `<stage>I<mb>` (input-gradient part)
// or `<stage>W<mb>` (weight-gradient part), where stage is a virtual stage id; a cell
// `(<a>;<b>)OVERLAP_F_B` holds two actions run here as a then b. Whitespace around actions is
// ignored, and so are empty cells. Every action remembers where it was written (the row's source
// and its cell index), so later checks can name it. Pure; thread-compatible.
#ifndef GPIPE_RUNTIME_SCHEDULE_ACTION_LIST_H_
#define GPIPE_RUNTIME_SCHEDULE_ACTION_LIST_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpipe::schedule {

enum class ActionType { kForward, kFullBackward, kBackwardInput, kBackwardWeight };

// 'F', 'B', 'I' or 'W'.
char ActionLetter(ActionType type);

struct Action {
  ActionType type = ActionType::kForward;
  int stage = 0;  // virtual stage id
  int micro_batch = 0;
  int index = 0;  // the cell it was written in, 0-based (both actions of an OVERLAP_F_B
                  // pair share their cell's index)
  bool operator==(const Action&) const = default;
};

// "3B5".
std::string ToString(const Action& action);

// One rank's actions in the order it runs them.
struct ActionRow {
  std::string source;  // names the row in messages: "path.csv:2", "pipeline.custom.ranks[1]"
  std::vector<Action> actions;
};

// index = rank.
using ActionTable = std::vector<ActionRow>;

// "path.csv:2: action 14 (3B5)": how every message names an action.
std::string DescribeAction(const ActionRow& row, const Action& action);

// Parses one cell (an action or an OVERLAP_F_B pair; surrounding whitespace ignored) into `out`
// with cell index `index`. INVALID_ARGUMENT "<source>: action <index> (<text>): ..." saying what
// the grammar expects.
absl::Status ParseActionCell(absl::string_view cell, const std::string& source, int index,
                             std::vector<Action>& out);

// One rank's actions separated by spaces or commas (RankActions.actions in plan.proto); empty
// cells ignored; the cell index counts the actions written before it.
absl::StatusOr<ActionRow> ParseActionText(absl::string_view text, const std::string& source);

// A CSV file's text: line i (1-based) is rank i - 1, cells separated by commas, named
// "<source_name>:<line>" in messages; the cell index is the column (empty cells count). Blank
// lines at the end are ignored (a final newline, CRLF line ends too). INVALID_ARGUMENT for
// garbage cells or a file without a single row.
absl::StatusOr<ActionTable> ParseScheduleCsv(absl::string_view text,
                                             const std::string& source_name);

}  // namespace gpipe::schedule

#endif  // GPIPE_RUNTIME_SCHEDULE_ACTION_LIST_H_

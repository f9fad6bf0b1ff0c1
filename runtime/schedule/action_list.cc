#include "runtime/schedule/action_list.h"

#include <cctype>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/core/status_macros.h"

namespace gpipe::schedule {
namespace {

constexpr absl::string_view kOverlapSuffix = "OVERLAP_F_B";
// Ids above this are refused as out of any range a program can have.
constexpr long long kMaxId = 1 << 24;

absl::Status CellError(const std::string& source, int index, absl::string_view cell,
                       absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(source, ": action ", index, " (", cell, "): ", what,
                   "; an action is <stage>F<mb>, <stage>B<mb>, <stage>I<mb>, <stage>W<mb> or "
                   "(<action>;<action>)OVERLAP_F_B, e.g. 0F3"));
}

// Digits at the front of `text`, consumed; false when there are none or too many.
bool ConsumeId(absl::string_view& text, int& id) {
  size_t n = 0;
  long long value = 0;
  while (n < text.size() && std::isdigit(static_cast<unsigned char>(text[n]))) {
    value = value * 10 + (text[n] - '0');
    if (value > kMaxId) return false;
    ++n;
  }
  if (n == 0) return false;
  id = static_cast<int>(value);
  text.remove_prefix(n);
  return true;
}

absl::Status ParseSingle(absl::string_view text, const std::string& source, int index,
                         absl::string_view cell, std::vector<Action>& out) {
  text = absl::StripAsciiWhitespace(text);
  Action action;
  action.index = index;
  absl::string_view rest = text;
  if (!ConsumeId(rest, action.stage)) {
    return CellError(
        source, index, cell,
        absl::StrCat("'", text, "' does not start with a stage id (0 ... ", kMaxId, ")"));
  }
  if (rest.empty()) {
    return CellError(source, index, cell, absl::StrCat("'", text, "' has no F, B, I or W"));
  }
  switch (rest.front()) {
    case 'F':
      action.type = ActionType::kForward;
      break;
    case 'B':
      action.type = ActionType::kFullBackward;
      break;
    case 'I':
      action.type = ActionType::kBackwardInput;
      break;
    case 'W':
      action.type = ActionType::kBackwardWeight;
      break;
    default:
      return CellError(
          source, index, cell,
          absl::StrCat("'", text, "': '", rest.substr(0, 1),
                       "' is not a computation gpipe runs (F, B, I or W); communication actions "
                       "are derived, not written"));
  }
  rest.remove_prefix(1);
  if (!ConsumeId(rest, action.micro_batch) || !rest.empty()) {
    return CellError(source, index, cell,
                     absl::StrCat("'", text, "' does not end with a micro-batch id"));
  }
  out.push_back(action);
  return absl::OkStatus();
}

}  // namespace

char ActionLetter(ActionType type) {
  switch (type) {
    case ActionType::kForward:
      return 'F';
    case ActionType::kFullBackward:
      return 'B';
    case ActionType::kBackwardInput:
      return 'I';
    case ActionType::kBackwardWeight:
      return 'W';
  }
  return '?';
}

std::string ToString(const Action& action) {
  return absl::StrCat(action.stage, std::string(1, ActionLetter(action.type)), action.micro_batch);
}

std::string DescribeAction(const ActionRow& row, const Action& action) {
  return absl::StrCat(row.source, ": action ", action.index, " (", ToString(action), ")");
}

absl::Status ParseActionCell(absl::string_view cell, const std::string& source, int index,
                             std::vector<Action>& out) {
  const absl::string_view text = absl::StripAsciiWhitespace(cell);
  if (!absl::StartsWith(text, "(")) return ParseSingle(text, source, index, text, out);
  const size_t close = text.find(')');
  if (close == absl::string_view::npos ||
      absl::StripAsciiWhitespace(text.substr(close + 1)) != kOverlapSuffix) {
    return CellError(source, index, text,
                     "a parenthesized pair must be written (<action>;<action>)OVERLAP_F_B");
  }
  const std::vector<absl::string_view> parts = absl::StrSplit(text.substr(1, close - 1), ';');
  if (parts.size() != 2) {
    return CellError(
        source, index, text,
        absl::StrCat("an OVERLAP_F_B pair holds 2 actions separated by ';', not ", parts.size()));
  }
  RETURN_IF_ERROR(ParseSingle(parts[0], source, index, text, out));
  return ParseSingle(parts[1], source, index, text, out);
}

absl::StatusOr<ActionRow> ParseActionText(absl::string_view text, const std::string& source) {
  ActionRow row;
  row.source = source;
  // Separators inside an OVERLAP_F_B pair's parentheses do not end its cell.
  int index = 0;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    const bool end = i == text.size();
    if (!end && text[i] == '(') ++depth;
    if (!end && text[i] == ')' && depth > 0) --depth;
    const bool separator = end || (depth == 0 && absl::string_view(" \t\r\n,").find(text[i]) !=
                                                     absl::string_view::npos);
    if (!separator) continue;
    const absl::string_view cell = text.substr(start, i - start);
    start = i + 1;
    if (cell.empty()) continue;
    RETURN_IF_ERROR(ParseActionCell(cell, source, index, row.actions));
    ++index;
  }
  return row;
}

absl::StatusOr<ActionTable> ParseScheduleCsv(absl::string_view text,
                                             const std::string& source_name) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  while (!lines.empty() && absl::StripAsciiWhitespace(lines.back()).empty()) lines.pop_back();
  if (lines.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source_name, ": holds no rows; write one row of actions per rank, e.g. 0F0,0B0"));
  }
  ActionTable table;
  table.reserve(lines.size());
  for (size_t line = 0; line < lines.size(); ++line) {
    ActionRow row;
    row.source = absl::StrCat(source_name, ":", line + 1);
    const std::vector<absl::string_view> cells = absl::StrSplit(lines[line], ',');
    for (size_t c = 0; c < cells.size(); ++c) {
      if (absl::StripAsciiWhitespace(cells[c]).empty()) continue;
      RETURN_IF_ERROR(ParseActionCell(cells[c], row.source, static_cast<int>(c), row.actions));
    }
    table.push_back(std::move(row));
  }
  return table;
}

}  // namespace gpipe::schedule

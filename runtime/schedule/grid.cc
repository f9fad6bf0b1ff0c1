#include "runtime/schedule/grid.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runtime/schedule/schedule_shape.h"

namespace gpipe::schedule {
namespace {

// Relative tolerance for "this time is a whole number of slots".
constexpr double kTimeTolerance = 1e-9;

// One compute instruction as drawn: [start, end) on its stage.
struct Block {
  double start;
  double end;
  char letter;  // see kPasses
  std::string label;
};

// The compute passes, in legend order: the letter a cell shows and the name the legend gives.
struct PassLook {
  char letter;
  const char* name;
};
constexpr PassLook kPasses[] = {
    {'F', "forward"},
    {'B', "backward"},
    {'b', "input-gradient"},   // zero-bubble B
    {'W', "weight-gradient"},  // zero-bubble W
};

// The letter of a compute instruction; 0 for the others.
char LetterOf(const Instruction& instruction) {
  if (std::holds_alternative<Forward>(instruction)) return 'F';
  if (std::holds_alternative<Backward>(instruction)) return 'B';
  if (std::holds_alternative<BackwardInput>(instruction)) return 'b';
  if (std::holds_alternative<BackwardWeight>(instruction)) return 'W';
  return 0;
}

// Compute blocks of positive length, per stage, in time order.
std::vector<std::vector<Block>> CollectBlocks(const Program& program, const VerifyResult& result) {
  std::vector<std::vector<Block>> blocks(program.stages);
  for (const TimelineEntry& entry : result.timeline) {
    if (entry.stage < 0 || entry.stage >= program.stages ||
        entry.stage >= static_cast<int>(program.stage_programs.size())) {
      continue;
    }
    const std::vector<Instruction>& instructions = program.stage_programs[entry.stage].instructions;
    if (entry.index < 0 || entry.index >= static_cast<int>(instructions.size())) continue;
    const Instruction& instruction = instructions[entry.index];
    const char letter = LetterOf(instruction);
    if (letter == 0 || !(entry.end > entry.start)) continue;
    std::string label = absl::StrCat(std::string(1, letter), *MicroBatchOf(instruction));
    if (program.chunks > 1) label.push_back(static_cast<char>('a' + ChunkOf(instruction) % 26));
    blocks[entry.stage].push_back({entry.start, entry.end, letter, std::move(label)});
  }
  for (std::vector<Block>& stage_blocks : blocks) {
    std::stable_sort(stage_blocks.begin(), stage_blocks.end(),
                     [](const Block& a, const Block& b) { return a.start < b.start; });
  }
  return blocks;
}

// "Fm/Bm = forward/backward of micro-batch m" (labelled) or "F/b/W = forward/input-gradient/
// weight-gradient" (letters only), naming only the passes drawn.
std::string PassLegend(const std::vector<std::vector<Block>>& blocks, bool labelled) {
  std::vector<std::string> letters, names;
  for (const PassLook& pass : kPasses) {
    bool drawn = false;
    for (const auto& stage_blocks : blocks) {
      for (const Block& block : stage_blocks) drawn = drawn || block.letter == pass.letter;
    }
    if (!drawn) continue;
    letters.push_back(labelled ? absl::StrCat(std::string(1, pass.letter), "m")
                               : std::string(1, pass.letter));
    names.push_back(pass.name);
  }
  std::string legend = absl::StrCat(absl::StrJoin(letters, "/"), " = ", absl::StrJoin(names, "/"));
  if (labelled) absl::StrAppend(&legend, " of micro-batch m");
  return legend;
}

bool IsMultiple(double time, double quantum) {
  const double slots = time / quantum;
  return std::abs(slots - std::round(slots)) <= kTimeTolerance * std::max(1.0, slots);
}

// The time one column stands for before any scaling: the shortest block, or a small fraction
// of it when that makes every block start and end on a column boundary.
double BaseQuantum(const std::vector<std::vector<Block>>& blocks) {
  double shortest = 0;
  for (const auto& stage_blocks : blocks) {
    for (const Block& block : stage_blocks) {
      const double length = block.end - block.start;
      if (shortest == 0 || length < shortest) shortest = length;
    }
  }
  for (int divisor = 1; divisor <= 8; ++divisor) {
    const double quantum = shortest / divisor;
    bool aligned = true;
    for (const auto& stage_blocks : blocks) {
      for (const Block& block : stage_blocks) {
        aligned = aligned && IsMultiple(block.start, quantum) && IsMultiple(block.end, quantum);
      }
    }
    if (aligned) return quantum;
  }
  return shortest;
}

// Columns needed to show [0, makespan) at `quantum` per column (as a double: it may be huge).
double ColumnsFor(double makespan, double quantum) {
  return std::max(1.0, std::ceil(makespan / quantum - kTimeTolerance));
}

// The block drawn in slot [from, to): the one covering most of it, or none (idle) when blocks
// cover less than half of it. `first` advances past blocks that end before the slot.
const Block* BlockInSlot(const std::vector<Block>& blocks, size_t& first, double from, double to) {
  const double tolerance = kTimeTolerance * std::max(1.0, to);
  while (first < blocks.size() && blocks[first].end <= from + tolerance) ++first;
  const Block* best = nullptr;
  double best_overlap = 0;
  double covered = 0;
  for (size_t b = first; b < blocks.size() && blocks[b].start < to - tolerance; ++b) {
    const double overlap = std::min(to, blocks[b].end) - std::max(from, blocks[b].start);
    if (overlap <= 0) continue;
    covered += overlap;
    if (overlap > best_overlap + tolerance) {
      best = &blocks[b];
      best_overlap = overlap;
    }
  }
  return covered * 2 >= (to - from) - tolerance ? best : nullptr;
}

// "1 stage", "4 stages", "1 micro-batch", "8 micro-batches".
std::string Count(int n, const char* noun) {
  const std::string singular = noun;
  if (n == 1) return absl::StrCat(n, " ", singular);
  return absl::StrCat(n, " ", singular, singular.back() == 'h' ? "es" : "s");
}

std::string Percent(double fraction) { return absl::StrFormat("%5.1f%%", 100.0 * fraction); }

std::string TimeUnits(double quantum) {
  return absl::StrFormat("%g time unit%s", quantum, quantum == 1.0 ? "" : "s");
}

// "time    | 0              5" : the time at the start of every few columns.
std::string Ruler(int prefix_width, int cell_width, int label_offset, int columns, double quantum) {
  std::string ruler(prefix_width + static_cast<size_t>(columns) * cell_width, ' ');
  ruler.replace(0, 4, "time");
  ruler[prefix_width - 1] = '|';
  int every = 1;
  const int widest = static_cast<int>(absl::StrFormat("%g", columns * quantum).size());
  for (int candidate : {5, 10, 20, 50, 100, 200, 500, 1000}) {
    every = candidate;
    if (candidate * cell_width >= widest + 2) break;
  }
  for (int column = 0; column < columns; column += every) {
    const std::string mark = absl::StrFormat("%g", column * quantum);
    const size_t at = prefix_width + static_cast<size_t>(column) * cell_width + label_offset;
    if (at + mark.size() > ruler.size()) break;
    ruler.replace(at, mark.size(), mark);
  }
  ruler.erase(ruler.find_last_not_of(' ') + 1);
  return ruler;
}

// The papers' bubble for equal stages and free transfers, to compare with the prediction:
// "; equal stages: (K-1)/(M+K-1) = 27.3%", or "" for kinds without a closed form here.
std::string PublishedBubble(const Program& program) {
  const int k = program.stages;
  const int m = program.micro_batches;
  const int v = program.chunks;
  std::string formula;
  double value = 0;
  const bool one_chunk = v == 1;
  if (one_chunk &&
      (program.kind == pb::GPIPE || program.kind == pb::ONE_F_ONE_B || program.kind == pb::EVAL)) {
    formula = "(K-1)/(M+K-1)";
    value = static_cast<double>(k - 1) / (m + k - 1);
  } else if (program.kind == pb::INTERLEAVED_1F1B) {
    formula = "(K-1)/(v*M+K-1)";
    value = static_cast<double>(k - 1) / (static_cast<double>(v) * m + k - 1);
  } else {
    return "";
  }
  return absl::StrCat("; equal stages: ", formula, " = ", absl::StrFormat("%.1f%%", 100.0 * value));
}

}  // namespace

std::string DrawGrid(const Program& program, const VerifyResult& result, int max_columns) {
  const std::string kind_name = pb::Schedule_IsValid(program.kind)
                                    ? pb::Schedule_Name(program.kind)
                                    : absl::StrCat("schedule ", static_cast<int>(program.kind));
  std::string out = absl::StrCat(kind_name, " schedule: ", Count(program.stages, "stage"), ", ",
                                 Count(program.micro_batches, "micro-batch"));
  if (program.chunks > 1) {
    absl::StrAppend(&out, ", ", program.chunks, " chunks per stage placed ",
                    pb::Placement_Name(program.placement));
  }
  absl::StrAppend(&out, ", makespan ", absl::StrFormat("%g", result.makespan));

  const std::vector<std::vector<Block>> blocks = CollectBlocks(program, result);
  size_t label_width = 0;
  for (const auto& stage_blocks : blocks) {
    for (const Block& block : stage_blocks) label_width = std::max(label_width, block.label.size());
  }
  if (label_width == 0 || !(result.makespan > 0)) {
    absl::StrAppend(&out, "\n(no forward or backward takes time: nothing to draw)\n");
    return out;
  }

  // Layout: "stage 3 |" cells " |" " 27.3%". Labelled cells are " F3"; letter cells "F".
  const int stage_digits = static_cast<int>(absl::StrCat(std::max(0, program.stages - 1)).size());
  const int prefix_width = 6 + stage_digits + 2;  // "stage " digits " |"
  const int suffix_width = 2 + 1 + 6;             // " |" " " "100.0%"
  const int available = std::max(1, max_columns - prefix_width - suffix_width);
  const double base_quantum = BaseQuantum(blocks);
  const double base_columns = ColumnsFor(result.makespan, base_quantum);
  const int labelled_width = static_cast<int>(label_width) + 1;
  const bool labelled = base_columns * labelled_width <= available;
  double quantum = base_quantum;
  if (!labelled && base_columns > available) {
    quantum = base_quantum * std::ceil(base_columns / available);
  }
  const int columns =
      static_cast<int>(std::min<double>(ColumnsFor(result.makespan, quantum), available));
  const int cell_width = labelled ? labelled_width : 1;

  absl::StrAppend(&out, ", one column = ", TimeUnits(quantum), "\n");
  if (const std::string note = DegenerateNote(program.kind, program.stages, program.micro_batches);
      !note.empty()) {
    absl::StrAppend(&out, "note: ", note, "\n");
  }
  absl::StrAppend(&out, Ruler(prefix_width, cell_width, labelled ? 1 : 0, columns, quantum), "\n");
  for (int s = 0; s < program.stages; ++s) {
    std::string row = absl::StrFormat("stage %*d |", stage_digits, s);
    size_t first = 0;
    for (int column = 0; column < columns; ++column) {
      const Block* block = BlockInSlot(blocks[s], first, column * quantum, (column + 1) * quantum);
      if (labelled) {
        const std::string text = block == nullptr ? "." : block->label;
        absl::StrAppend(&row, " ", text, std::string(label_width - text.size(), ' '));
      } else {
        row.push_back(block == nullptr ? '.' : block->letter);
      }
    }
    absl::StrAppend(&row, labelled ? " |" : "|");
    if (s < static_cast<int>(result.stage_bubble.size())) {
      absl::StrAppend(&row, " ", Percent(result.stage_bubble[s]));
    }
    absl::StrAppend(&out, row, "\n");
  }

  const std::string chunk_note = program.chunks > 1 ? " (letter = chunk)" : "";
  if (labelled) {
    absl::StrAppend(&out, "legend: ", PassLegend(blocks, true), chunk_note,
                    ", . = idle; right: bubble per stage\n");
  } else {
    absl::StrAppend(&out, "legend: ", PassLegend(blocks, false),
                    " (micro-batch numbers do not fit in ", max_columns,
                    " columns), . = idle; right: bubble per stage\n");
  }
  absl::StrAppend(&out, "bubble: ", absl::StrFormat("%.1f%%", 100.0 * result.bubble_fraction),
                  " overall (mean over stages of idle time / makespan)");
  absl::StrAppend(&out, PublishedBubble(program), "\n");
  return out;
}

}  // namespace gpipe::schedule

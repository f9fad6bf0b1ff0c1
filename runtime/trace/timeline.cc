#include "runtime/trace/timeline.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpipe::trace {

const char* BoxKindName(BoxKind kind) {
  switch (kind) {
    case BoxKind::kForward:
      return "forward";
    case BoxKind::kBackward:
      return "backward";
    case BoxKind::kBackwardInput:
      return "backward-input";
    case BoxKind::kBackwardWeight:
      return "backward-weight";
    case BoxKind::kOther:
      return "other";
  }
  return "other";
}

bool CountsAsBusy(BoxKind kind) { return kind != BoxKind::kOther; }

const char* TimeUnitName(TimeUnit unit) {
  return unit == TimeUnit::kMilliseconds ? "ms" : "time units";
}

double Timeline::MeanBubble() const {
  double sum = 0;
  int counted = 0;
  for (const TimelineRow& row : rows) {
    if (!row.has_data) continue;
    sum += row.bubble;
    ++counted;
  }
  return counted == 0 ? 0.0 : sum / counted;
}

void MeasureRows(Timeline& timeline) {
  // Per row, the busy intervals clipped to the window; their union is the busy time, so two
  // spans that overlap (replicas drawn on one row, clock jitter) are not counted twice.
  std::vector<std::vector<std::pair<double, double>>> intervals(timeline.rows.size());
  for (const TimelineBox& box : timeline.boxes) {
    if (!CountsAsBusy(box.kind) || box.row < 0 ||
        box.row >= static_cast<int>(timeline.rows.size())) {
      continue;
    }
    const double begin = std::max(box.begin, timeline.window_begin);
    const double end = std::min(box.end, timeline.window_end);
    if (end > begin) intervals[box.row].emplace_back(begin, end);
  }
  const double window = timeline.window();
  for (size_t r = 0; r < timeline.rows.size(); ++r) {
    std::vector<std::pair<double, double>>& spans = intervals[r];
    std::sort(spans.begin(), spans.end());
    double busy = 0;
    double covered_to = timeline.window_begin;
    for (const auto& [begin, end] : spans) {
      const double from = std::max(begin, covered_to);
      if (end > from) busy += end - from;
      covered_to = std::max(covered_to, end);
    }
    TimelineRow& row = timeline.rows[r];
    row.busy = busy;
    row.bubble = window > 0 ? 1.0 - busy / window : 0.0;
  }
}

std::string FormatRowSummary(const Timeline& timeline) {
  const char* unit = TimeUnitName(timeline.unit);
  std::string out;
  for (const TimelineRow& row : timeline.rows) {
    if (!row.has_data) {
      absl::StrAppend(&out, row.label, ": no data\n");
      continue;
    }
    absl::StrAppendFormat(&out, "%s: busy %.3f %s of %.3f %s, bubble %.1f%%\n", row.label, row.busy,
                          unit, timeline.window(), unit, 100.0 * row.bubble);
  }
  return out;
}

}  // namespace gpipe::trace

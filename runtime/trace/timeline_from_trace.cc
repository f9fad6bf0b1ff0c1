#include "runtime/trace/timeline_from_trace.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runtime/core/status_macros.h"
#include "runtime/trace/timeline_trace_events.h"

namespace gpipe::trace {
namespace {

constexpr double kMicrosecondsPerMs = 1000.0;

BoxKind KindOfCategory(const std::string& category) {
  if (category == "forward") return BoxKind::kForward;
  if (category == "backward") return BoxKind::kBackward;
  if (category == "backward_input") return BoxKind::kBackwardInput;
  if (category == "backward_weight") return BoxKind::kBackwardWeight;
  return BoxKind::kOther;
}

bool IsTrainingStepSpan(const TimelineSpan& span) {
  return span.thread == kStepsThread && span.category == "step" && span.step.has_value();
}

// "0-5, 7" for a sorted set of steps.
std::string DescribeSteps(const std::set<int64_t>& steps) {
  std::vector<std::string> ranges;
  for (auto it = steps.begin(); it != steps.end();) {
    const int64_t first = *it;
    int64_t last = first;
    for (++it; it != steps.end() && *it == last + 1; ++it) last = *it;
    ranges.push_back(first == last ? absl::StrCat(first) : absl::StrCat(first, "-", last));
  }
  return ranges.empty() ? "none" : absl::StrJoin(ranges, ", ");
}

// The training steps each rank that recorded anything completed (has a "step" span for). A
// rank named in the metadata without a single span is a missing rank, not one that completed
// nothing: it must not rule out every step.
std::map<int, std::set<int64_t>> CompletedSteps(const TraceContents& contents) {
  std::map<int, std::set<int64_t>> steps;
  for (const TimelineSpan& span : contents.spans) {
    std::set<int64_t>& completed = steps[span.rank];
    if (IsTrainingStepSpan(span)) completed.insert(*span.step);
  }
  return steps;
}

absl::StatusOr<int64_t> ChooseStep(const std::map<int, std::set<int64_t>>& completed,
                                   const TraceTimelineOptions& options) {
  std::set<int64_t> any;
  for (const auto& [rank, steps] : completed) any.insert(steps.begin(), steps.end());
  if (any.empty()) {
    return absl::InvalidArgumentError(
        "the trace holds no completed training step (no \"step\" spans on tid 0): the run "
        "stopped before its first step ended");
  }
  if (options.step) {
    if (any.contains(*options.step)) return *options.step;
    return absl::InvalidArgumentError(absl::StrCat(
        "step ", *options.step, " is not in the trace; it holds steps ", DescribeSteps(any)));
  }
  std::set<int64_t> every = any;
  std::string per_rank;
  for (const auto& [rank, steps] : completed) {
    std::set<int64_t> kept;
    std::set_intersection(every.begin(), every.end(), steps.begin(), steps.end(),
                          std::inserter(kept, kept.begin()));
    every = std::move(kept);
    absl::StrAppend(&per_rank, "; rank ", rank, ": ", DescribeSteps(steps));
  }
  if (every.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("no training step was completed by every rank",
                                                   per_rank, ". Pick one with --step N"));
  }
  return *every.rbegin();
}

std::string StageLabel(int stage) { return absl::StrCat("stage ", stage); }

// Rows and the row of each rank.
void BuildRows(const TraceContents& contents, const std::set<int>& ranks_in_step,
               const TraceTimelineOptions& options, Timeline& timeline,
               std::map<int, int>& row_of_rank) {
  std::map<int, int> ranks_per_stage;
  int stages = static_cast<int>(contents.stages);
  for (const auto& [rank, place] : contents.places) {
    ++ranks_per_stage[place.stage];
    stages = std::max(stages, place.stage + 1);
  }
  bool by_rank = options.rows == TraceTimelineOptions::Rows::kRank;
  if (options.rows == TraceTimelineOptions::Rows::kAuto) {
    for (const auto& [stage, count] : ranks_per_stage) by_rank = by_rank || count > 1;
  }
  if (!by_rank) {
    for (int s = 0; s < stages; ++s) {
      TimelineRow row;
      row.label = StageLabel(s);
      row.stage = s;
      row.has_data = false;
      timeline.rows.push_back(row);
    }
    for (const auto& [rank, place] : contents.places) {
      row_of_rank[rank] = place.stage;
      TimelineRow& row = timeline.rows[place.stage];
      row.rank = rank;
      row.replica = place.replica;
      row.has_data = row.has_data || ranks_in_step.contains(rank);
    }
    return;
  }
  std::vector<std::pair<std::pair<int, int>, int>> ordered;  // ((stage, replica), rank)
  for (const auto& [rank, place] : contents.places) {
    ordered.push_back({{place.stage, place.replica}, rank});
  }
  std::sort(ordered.begin(), ordered.end());
  for (const auto& [place, rank] : ordered) {
    TimelineRow row;
    row.label = absl::StrCat(StageLabel(place.first), ", replica ", place.second);
    row.stage = place.first;
    row.replica = place.second;
    row.rank = rank;
    row.has_data = ranks_in_step.contains(rank);
    row_of_rank[rank] = static_cast<int>(timeline.rows.size());
    timeline.rows.push_back(row);
  }
}

void AddNotes(const TraceContents& contents, int64_t step,
              const std::map<int, std::set<int64_t>>& completed, Timeline& timeline) {
  if (!contents.status.empty() && contents.status != "ok") {
    timeline.notes.push_back(absl::StrCat("the run failed: ", contents.status));
  }
  if (!contents.missing_ranks.empty()) {
    timeline.notes.push_back(absl::StrCat("ranks without events (missing_ranks): ",
                                          absl::StrJoin(contents.missing_ranks, ", ")));
  }
  for (const auto& [rank, steps] : completed) {
    if (!steps.contains(step)) {
      timeline.notes.push_back(absl::StrCat("rank ", rank, " did not complete step ", step));
    }
  }
  const double window_us = timeline.window() * kMicrosecondsPerMs;
  // Boxes of different ranks are placed by clocks aligned only this well; say so when it shows.
  if (contents.max_clock_uncertainty_us > 0.01 * window_us) {
    timeline.notes.push_back(absl::StrFormat("rank clocks agree within +-%.1f us only",
                                             contents.max_clock_uncertainty_us));
  }
}

}  // namespace

absl::StatusOr<Timeline> TimelineFromTrace(absl::string_view json_text,
                                           const TraceTimelineOptions& options) {
  ASSIGN_OR_RETURN(const TraceContents contents, ReadTraceContents(json_text));
  const std::map<int, std::set<int64_t>> completed = CompletedSteps(contents);
  ASSIGN_OR_RETURN(const int64_t step, ChooseStep(completed, options));

  Timeline timeline;
  timeline.plan = contents.plan;
  timeline.schedule = contents.schedule;
  timeline.remat = contents.remat;
  timeline.device = contents.device;
  timeline.stages = static_cast<int>(contents.stages);
  timeline.micro_batches = static_cast<int>(contents.micro_batches);
  timeline.chunks = static_cast<int>(contents.chunks);
  timeline.step = step;
  timeline.unit = TimeUnit::kMilliseconds;

  // The window, and each rank's own span of the step (for compute spans without args.step).
  double begin = std::numeric_limits<double>::infinity();
  double end = -std::numeric_limits<double>::infinity();
  std::map<int, std::pair<double, double>> rank_step;
  std::set<int> ranks_in_step;
  for (const TimelineSpan& span : contents.spans) {
    if (!IsTrainingStepSpan(span) || *span.step != step) continue;
    begin = std::min(begin, span.begin_us);
    end = std::max(end, span.end_us);
    rank_step[span.rank] = {span.begin_us, span.end_us};
    ranks_in_step.insert(span.rank);
  }
  timeline.window_begin = begin / kMicrosecondsPerMs;
  timeline.window_end = end / kMicrosecondsPerMs;

  std::map<int, int> row_of_rank;
  BuildRows(contents, ranks_in_step, options, timeline, row_of_rank);
  if (timeline.stages == 0) timeline.stages = static_cast<int>(timeline.rows.size());

  for (const TimelineSpan& span : contents.spans) {
    if (span.thread != kComputeThread || span.eval) continue;
    if (span.step) {
      if (*span.step != step) continue;
    } else {
      const auto it = rank_step.find(span.rank);
      if (it == rank_step.end() || span.begin_us < it->second.first ||
          span.end_us > it->second.second) {
        continue;
      }
    }
    TimelineBox box;
    box.row = row_of_rank.at(span.rank);
    box.begin = span.begin_us / kMicrosecondsPerMs;
    box.end = span.end_us / kMicrosecondsPerMs;
    box.kind = KindOfCategory(span.category);
    box.micro_batch = span.micro_batch ? static_cast<int>(*span.micro_batch) : -1;
    box.chunk = static_cast<int>(span.chunk);
    box.name = span.name;
    timeline.boxes.push_back(box);
    timeline.rows[box.row].has_data = true;
  }
  MeasureRows(timeline);
  AddNotes(contents, step, completed, timeline);
  return timeline;
}

}  // namespace gpipe::trace

#include "runtime/trace/timeline_trace_events.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/core/json.h"
#include "runtime/core/json_fields.h"

namespace gpipe::trace {
namespace {

constexpr char kWhatToRead[] =
    "gpipe-plan timeline reads the Chrome trace gpipe writes with runtime { trace: \"...\" }";

absl::Status NotAGpipeTrace(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("not a gpipe trace: ", why, "; ", kWhatToRead));
}

std::optional<double> NumberOf(const Json* value) {
  if (value == nullptr || !value->is_number()) return std::nullopt;
  return value->get<double>();
}

// Whole numbers written either way ("12" or "12.0").
std::optional<int64_t> IntOf(const Json* value) {
  if (value == nullptr || !value->is_number()) return std::nullopt;
  if (std::optional<int64_t> exact = JsonAsInt64(*value)) return exact;
  const double number = value->get<double>();
  if (std::floor(number) != number || std::fabs(number) > 9.0e15) return std::nullopt;
  return static_cast<int64_t>(number);
}

std::string StringOf(const Json* value) {
  return value != nullptr && value->is_string() ? value->get<std::string>() : std::string();
}

// The largest stage or replica number a trace may name (pids are bounded the same way).
constexpr int64_t kMaxPlace = 1000000;

// "stage 2, replica 0" (or just "stage 2").
std::optional<RankPlace> ParseProcessName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, "stage ")) return std::nullopt;
  const std::vector<absl::string_view> parts = absl::StrSplit(name, absl::ByString(", replica "));
  RankPlace place;
  if (parts.size() > 2 || !absl::SimpleAtoi(parts[0], &place.stage) || place.stage < 0) {
    return std::nullopt;
  }
  if (parts.size() == 2 && (!absl::SimpleAtoi(parts[1], &place.replica) || place.replica < 0)) {
    return std::nullopt;
  }
  return place;
}

// The numbers in a span's name, for writers that leave args out: "F3.1" -> (3, 1),
// "load 3" -> (3, nullopt), "step 12" -> (12, nullopt).
std::pair<std::optional<int64_t>, std::optional<int64_t>> NumbersInName(absl::string_view name) {
  const size_t first = name.find_first_of("0123456789");
  if (first == absl::string_view::npos) return {std::nullopt, std::nullopt};
  name.remove_prefix(first);
  const std::vector<absl::string_view> parts = absl::StrSplit(name, '.');
  int64_t major = 0, minor = 0;
  std::pair<std::optional<int64_t>, std::optional<int64_t>> out;
  if (absl::SimpleAtoi(parts[0], &major)) out.first = major;
  if (parts.size() == 2 && absl::SimpleAtoi(parts[1], &minor)) out.second = minor;
  return out;
}

void ReadOtherData(const Json& other, TraceContents& contents) {
  contents.plan = StringOf(JsonFind(other, "plan"));
  contents.schedule = StringOf(JsonFind(other, "schedule"));
  contents.remat = StringOf(JsonFind(other, "remat"));
  contents.device = StringOf(JsonFind(other, "device"));
  contents.status = StringOf(JsonFind(other, "status"));
  contents.stages = IntOf(JsonFind(other, "stages")).value_or(0);
  contents.micro_batches = IntOf(JsonFind(other, "micro_batches")).value_or(0);
  contents.chunks = std::max<int64_t>(1, IntOf(JsonFind(other, "chunks")).value_or(1));
  contents.ranks = IntOf(JsonFind(other, "ranks")).value_or(0);
  if (const Json* missing = JsonFind(other, "missing_ranks"); missing && missing->is_array()) {
    for (const Json& rank : *missing) {
      if (std::optional<int64_t> r = IntOf(&rank)) contents.missing_ranks.push_back(*r);
    }
  }
  if (const Json* uncertainty = JsonFind(other, "clock_uncertainty_us");
      uncertainty && uncertainty->is_array()) {
    for (const Json& us : *uncertainty) {
      contents.max_clock_uncertainty_us =
          std::max(contents.max_clock_uncertainty_us, NumberOf(&us).value_or(0));
    }
  }
}

// A complete span on the steps or compute thread; nullopt for spans of other threads.
absl::StatusOr<std::optional<TimelineSpan>> ReadSpan(const Json& event, size_t index) {
  const std::optional<int64_t> pid = IntOf(JsonFind(event, "pid"));
  const std::optional<int64_t> tid = IntOf(JsonFind(event, "tid"));
  const std::string name = StringOf(JsonFind(event, "name"));
  const std::string where = absl::StrCat(
      "traceEvents[", index, "]", pid ? absl::StrCat(" (rank ", *pid, ", \"", name, "\")") : "");
  if (!pid || *pid < 0 || *pid > 1000000) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": 'pid' (the rank) is missing or not a non-negative integer"));
  }
  if (!tid) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": 'tid' is missing or not an integer"));
  }
  if (*tid != kStepsThread && *tid != kComputeThread) return std::optional<TimelineSpan>();
  const std::optional<double> ts = NumberOf(JsonFind(event, "ts"));
  const std::optional<double> dur = NumberOf(JsonFind(event, "dur"));
  if (!ts || !std::isfinite(*ts)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": 'ts' is missing or not a number"));
  }
  if (!dur || !std::isfinite(*dur) || *dur < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": 'dur' is missing or not a non-negative number"));
  }
  TimelineSpan span;
  span.rank = static_cast<int>(*pid);
  span.thread = static_cast<int>(*tid);
  span.begin_us = *ts;
  span.end_us = *ts + *dur;
  span.category = StringOf(JsonFind(event, "cat"));
  span.name = name;
  const Json* args = JsonFind(event, "args");
  const auto [name_major, name_minor] = NumbersInName(name);
  span.step = IntOf(JsonFind(args, "step"));
  if (span.thread == kStepsThread && !span.step) span.step = name_major;
  span.micro_batch = IntOf(JsonFind(args, "micro_batch"));
  if (span.thread == kComputeThread && !span.micro_batch) span.micro_batch = name_major;
  span.chunk = IntOf(JsonFind(args, "chunk")).value_or(name_minor.value_or(0));
  const Json* eval = JsonFind(args, "eval");
  span.eval = eval != nullptr && eval->is_boolean() && eval->get<bool>();
  return std::optional<TimelineSpan>(std::move(span));
}

}  // namespace

absl::StatusOr<TraceContents> ReadTraceContents(absl::string_view json_text) {
  absl::StatusOr<Json> parsed = ParseJson(json_text, "the file");
  if (!parsed.ok()) return NotAGpipeTrace(parsed.status().message());
  if (!parsed->is_object()) {
    return NotAGpipeTrace(absl::StrCat("the top level is a JSON ", parsed->type_name(),
                                       ", not an object with traceEvents"));
  }
  const Json* events = JsonFind(*parsed, "traceEvents");
  if (events == nullptr || !events->is_array())
    return NotAGpipeTrace("it has no traceEvents array");
  const Json* other = JsonFind(*parsed, "otherData");
  if (StringOf(JsonFind(other, "generator")) != "gpipe") {
    return NotAGpipeTrace("otherData.generator is not \"gpipe\"");
  }
  if (const std::optional<int64_t> format = IntOf(JsonFind(other, "format"));
      format && *format > kTraceFormat) {
    return absl::InvalidArgumentError(
        absl::StrCat("trace format ", *format, " is newer than this gpipe-plan reads (",
                     kTraceFormat, "): draw it with the gpipe build that wrote it"));
  }

  TraceContents contents;
  ReadOtherData(*other, contents);
  std::map<int, RankPlace> named;
  for (size_t i = 0; i < events->size(); ++i) {
    const Json& event = (*events)[i];
    if (!event.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat("traceEvents[", i, "] is a JSON ", event.type_name(), ", not an object"));
    }
    const std::string phase = StringOf(JsonFind(event, "ph"));
    if (phase == "M" && StringOf(JsonFind(event, "name")) == "process_name") {
      const std::optional<int64_t> pid = IntOf(JsonFind(event, "pid"));
      const std::optional<RankPlace> place =
          ParseProcessName(StringOf(JsonFind(JsonFind(event, "args"), "name")));
      if (pid && place) named[static_cast<int>(*pid)] = *place;
    } else if (phase == "X") {
      absl::StatusOr<std::optional<TimelineSpan>> span = ReadSpan(event, i);
      if (!span.ok()) return span.status();
      if (span->has_value()) contents.spans.push_back(std::move(**span));
    }
  }

  // Stage of each rank: its process name, else the stage its compute spans say.
  contents.places = named;
  std::map<int, std::optional<int64_t>> stage_from_args;
  for (const TimelineSpan& span : contents.spans) stage_from_args.try_emplace(span.rank);
  for (size_t i = 0; i < events->size(); ++i) {
    const Json& event = (*events)[i];
    const std::optional<int64_t> pid = IntOf(JsonFind(event, "pid"));
    const std::optional<int64_t> stage = IntOf(JsonFind(JsonFind(event, "args"), "stage"));
    if (!pid || !stage || *stage < 0) continue;
    auto it = stage_from_args.find(static_cast<int>(*pid));
    if (it != stage_from_args.end() && !it->second) it->second = stage;
  }
  for (const auto& [rank, stage] : stage_from_args) {
    if (contents.places.contains(rank)) continue;
    if (!stage) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank,
                       ": cannot tell its stage: it has no process_name \"stage S, replica R\" "
                       "and none of its events carries args.stage"));
    }
    if (*stage > kMaxPlace) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank, ": args.stage ", *stage, " is not a stage number"));
    }
    contents.places[rank] = RankPlace{static_cast<int>(*stage), 0};
  }
  // A malformed trace must not make the picture allocate a row per claimed stage.
  for (const auto& [rank, place] : contents.places) {
    const bool beyond =
        contents.stages > 0 ? place.stage >= contents.stages : place.stage > kMaxPlace;
    if (beyond || place.replica > kMaxPlace) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", rank, " claims stage ", place.stage, ", replica ", place.replica,
          contents.stages > 0 ? absl::StrCat(" but the trace has ", contents.stages, " stages")
                              : std::string(" (not a plausible stage)")));
    }
  }
  return contents;
}

}  // namespace gpipe::trace

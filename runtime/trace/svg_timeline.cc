#include "runtime/trace/svg_timeline.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runtime/trace/svg_writer.h"

namespace gpipe::trace {
namespace {

// Fills per kind: the first chunk's, and a lighter one for chunks 1 and up (interleaved
// schedules run two or more chunks on each stage). Text colours keep labels readable on each.
struct KindStyle {
  const char* fill;
  const char* light_fill;
  const char* text;
  const char* light_text;
};

KindStyle StyleOf(BoxKind kind) {
  switch (kind) {
    case BoxKind::kForward:
      return {"#4e79a7", "#a9c6e8", "#ffffff", "#1f3550"};
    case BoxKind::kBackward:
    case BoxKind::kBackwardInput:
      return {"#f28e2b", "#fbc995", "#2b1600", "#4a2a00"};
    case BoxKind::kBackwardWeight:
      return {"#59a14f", "#b5dcae", "#ffffff", "#1d3d19"};
    case BoxKind::kOther:
      break;
  }
  return {"#8c8c8c", "#bdbdbd", "#ffffff", "#222222"};
}

constexpr char kLaneFill[] = "#efefef";
constexpr char kGridStroke[] = "#d6d6d6";
constexpr char kInkFill[] = "#222222";
constexpr char kNoteFill[] = "#a61c00";
constexpr double kMargin = 14;
constexpr double kLabelSize = 12;
constexpr double kTitleSize = 15;
constexpr double kRulerHeight = 46;
constexpr double kLegendLine = 24;
constexpr double kLabelWidthPerBox = 26;  // pixels a typical box gets, enough for "63"
constexpr double kSmallestLabelSize = 8;

std::string Percent(double fraction) { return absl::StrFormat("%.1f%%", 100.0 * fraction); }

// 1, 2 or 5 times a power of ten, so that `span` has about `ticks` ticks.
double NiceTickStep(double span, double ticks) {
  const double raw = span / std::max(ticks, 1.0);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 5.0}) {
    if (m * magnitude >= raw) return m * magnitude;
  }
  return 10.0 * magnitude;
}

std::string TitleFacts(const Timeline& timeline) {
  std::vector<std::string> parts;
  if (!timeline.plan.empty()) parts.push_back(timeline.plan);
  if (!timeline.schedule.empty()) {
    parts.push_back(timeline.chunks > 1 ? absl::StrCat(timeline.schedule, " v=", timeline.chunks)
                                        : timeline.schedule);
  }
  parts.push_back(absl::StrCat("K=", timeline.stages, " stages"));
  if (timeline.micro_batches > 0) {
    parts.push_back(absl::StrCat("M=", timeline.micro_batches, " micro-batches"));
  }
  if (!timeline.remat.empty()) parts.push_back(absl::StrCat("remat ", timeline.remat));
  if (!timeline.device.empty()) parts.push_back(timeline.device);
  return absl::StrJoin(parts, "  |  ");
}

std::string TitleFigures(const Timeline& timeline) {
  if (timeline.simulated) {
    std::string out = absl::StrFormat("simulated step: %.2f %s, mean bubble %s", timeline.window(),
                                      TimeUnitName(timeline.unit), Percent(timeline.MeanBubble()));
    if (timeline.predicted_bubble) {
      absl::StrAppend(&out, " (simulator's prediction ", Percent(*timeline.predicted_bubble), ")");
    }
    return out;
  }
  return absl::StrFormat("%s: %.3f ms, mean bubble %s (measured)",
                         timeline.step ? absl::StrCat("step ", *timeline.step) : "step",
                         timeline.window(), Percent(timeline.MeanBubble()));
}

struct LegendItem {
  std::string fill;
  std::string label;
};

std::vector<LegendItem> LegendItems(const Timeline& timeline) {
  bool present[5] = {false, false, false, false, false};
  bool chunked = false;
  for (const TimelineBox& box : timeline.boxes) {
    present[static_cast<int>(box.kind)] = true;
    chunked = chunked || box.chunk > 0;
  }
  present[static_cast<int>(BoxKind::kForward)] = true;
  if (!present[static_cast<int>(BoxKind::kBackwardInput)]) {
    present[static_cast<int>(BoxKind::kBackward)] = true;
  }
  const std::pair<BoxKind, const char*> kinds[] = {
      {BoxKind::kForward, "forward"},
      {BoxKind::kBackward, "backward"},
      {BoxKind::kBackwardInput, "backward (input gradient)"},
      {BoxKind::kBackwardWeight, "backward (weight gradient)"},
  };
  std::vector<LegendItem> items;
  for (const auto& [kind, label] : kinds) {
    if (!present[static_cast<int>(kind)]) continue;
    items.push_back({StyleOf(kind).fill, label});
    if (chunked) items.push_back({StyleOf(kind).light_fill, absl::StrCat(label, ", chunk 1+")});
  }
  if (present[static_cast<int>(BoxKind::kOther)]) {
    items.push_back({StyleOf(BoxKind::kOther).fill, "other (load, optimizer, all-reduce)"});
  }
  items.push_back({kLaneFill, "idle (bubble)"});
  return items;
}

// The width the time axis gets: a typical busy box about kLabelWidthPerBox pixels wide.
double PlotWidth(const Timeline& timeline, const SvgTimelineOptions& options) {
  std::vector<double> durations;
  for (const TimelineBox& box : timeline.boxes) {
    if (CountsAsBusy(box.kind) && box.end > box.begin) durations.push_back(box.end - box.begin);
  }
  if (durations.empty() || timeline.window() <= 0) return options.min_plot_width;
  std::nth_element(durations.begin(), durations.begin() + durations.size() / 2, durations.end());
  const double typical = durations[durations.size() / 2];
  return std::clamp(timeline.window() / typical * kLabelWidthPerBox, options.min_plot_width,
                    options.max_plot_width);
}

// The largest font size, from `preferred` down to kSmallestLabelSize, at which `label` fits a
// box `box_width` wide; nullopt when none does.
std::optional<double> LabelSize(const std::string& label, double preferred, double box_width) {
  for (double size = preferred; size >= kSmallestLabelSize; size -= 1) {
    if (EstimateTextWidth(label, size) + 3 <= box_width) return size;
  }
  return std::nullopt;
}

std::string Tooltip(const Timeline& timeline, const TimelineBox& box) {
  const char* unit = TimeUnitName(timeline.unit);
  return absl::StrFormat("%s, %s: %.3f to %.3f %s (%.3f %s)", box.name,
                         timeline.rows[box.row].label, box.begin - timeline.window_begin,
                         box.end - timeline.window_begin, unit, box.end - box.begin, unit);
}

}  // namespace

std::string RenderTimelineSvg(const Timeline& timeline, const SvgTimelineOptions& options) {
  const int rows = static_cast<int>(timeline.rows.size());
  double label_width = 0;
  for (const TimelineRow& row : timeline.rows) {
    label_width = std::max(label_width, EstimateTextWidth(row.label, kLabelSize));
  }
  const double plot_left = kMargin + label_width + 10;
  const double plot_width = PlotWidth(timeline, options);
  const double plot_right = plot_left + plot_width;
  const double width = plot_right + 10 + EstimateTextWidth("bubble 100.0%", kLabelSize) + kMargin;
  // Lanes shrink with many stages so K = 16 still fits a screen.
  const double row_height = std::clamp(400.0 / std::max(rows, 1), 18.0, 34.0);
  const double box_height = row_height - 6;
  const double label_size = std::min(11.0, box_height * 0.62);
  int last_micro_batch = 0;
  for (const TimelineBox& box : timeline.boxes) {
    last_micro_batch = std::max(last_micro_batch, box.micro_batch);
  }
  const std::string widest_label = absl::StrCat(last_micro_batch);

  const std::string facts = TitleFacts(timeline);
  const std::string figures = TitleFigures(timeline);
  const std::vector<LegendItem> legend = LegendItems(timeline);
  const double title_width =
      std::max(EstimateTextWidth(facts, kTitleSize) * 1.05, EstimateTextWidth(figures, 13));
  const double canvas_width = std::max(width, title_width + 2 * kMargin);
  std::vector<double> legend_widths;
  int legend_lines = 1;
  double legend_x = 0;
  for (const LegendItem& item : legend) {
    legend_widths.push_back(14 + 6 + EstimateTextWidth(item.label, kLabelSize) + 18);
    if (legend_x + legend_widths.back() > canvas_width - 2 * kMargin && legend_x > 0) {
      ++legend_lines;
      legend_x = 0;
    }
    legend_x += legend_widths.back();
  }

  const double plot_top =
      kMargin + 22 + 20 + 17.0 * static_cast<double>(timeline.notes.size()) + 12;
  const double plot_bottom = plot_top + rows * row_height;
  const double height = plot_bottom + kRulerHeight + legend_lines * kLegendLine + kMargin;

  SvgWriter svg(canvas_width, height);
  svg.Text(kMargin, kMargin + 8, facts, {.size = kTitleSize, .bold = true}, "title");
  svg.Text(kMargin, kMargin + 30, figures, {.size = 13}, "figures");
  for (size_t i = 0; i < timeline.notes.size(); ++i) {
    svg.Text(kMargin, kMargin + 50 + 17.0 * i, timeline.notes[i],
             {.size = kLabelSize, .fill = kNoteFill}, "note");
  }

  const double window = timeline.window();
  const double scale = window > 0 ? plot_width / window : 0;
  const auto x_of = [&](double t) {
    return plot_left + std::clamp(t - timeline.window_begin, 0.0, window) * scale;
  };

  // Lanes: what stays visible of them is idle time.
  for (int r = 0; r < rows; ++r) {
    const TimelineRow& row = timeline.rows[r];
    const double y = plot_top + r * row_height + 3;
    svg.Rect(plot_left, y, plot_width, box_height, kLaneFill, "lane");
    svg.Text(plot_left - 10, y + box_height / 2, row.label, {.size = kLabelSize, .anchor = "end"},
             "stage");
    svg.Text(plot_right + 10, y + box_height / 2,
             row.has_data ? absl::StrCat("bubble ", Percent(row.bubble)) : "no data",
             {.size = kLabelSize, .fill = row.has_data ? kInkFill : kNoteFill}, "bubble");
  }

  // Ruler, with faint lines through the lanes at each tick.
  const double tick_step = window > 0 ? NiceTickStep(window, plot_width / 90.0) : 1;
  const int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(tick_step) + 1e-9)));
  svg.Line(plot_left, plot_bottom + 4, plot_right, plot_bottom + 4, kInkFill, 1);
  for (int i = 0; window > 0 && i * tick_step <= window * (1 + 1e-9); ++i) {
    const double x = plot_left + i * tick_step * scale;
    svg.Line(x, plot_top, x, plot_bottom, kGridStroke, 0.6);
    svg.Line(x, plot_bottom + 4, x, plot_bottom + 9, kInkFill, 1);
    svg.Text(x, plot_bottom + 18, absl::StrFormat("%.*f", decimals, i * tick_step),
             {.size = 10.5, .anchor = "middle"}, "tick");
  }
  svg.Text(
      plot_left + plot_width / 2, plot_bottom + 35,
      absl::StrCat("time (", TimeUnitName(timeline.unit), timeline.unit_note.empty() ? "" : "; ",
                   timeline.unit_note, ") from the start of the step"),
      {.size = kLabelSize, .anchor = "middle"}, "axis");

  for (const TimelineBox& box : timeline.boxes) {
    if (box.row < 0 || box.row >= rows) continue;
    const KindStyle style = StyleOf(box.kind);
    const bool light = box.chunk > 0;
    const double x = x_of(box.begin);
    // A box too short to see still gets a sliver, so every operation is drawn.
    const double w = std::max(x_of(box.end) - x, 0.5);
    const bool other = box.kind == BoxKind::kOther;
    const double h = other ? box_height * 0.4 : box_height;
    const double y = plot_top + box.row * row_height + 3 + (box_height - h) / 2;
    svg.Rect(x, y, w, h, light ? style.light_fill : style.fill, "box", Tooltip(timeline, box),
             w >= 4 ? "#ffffff" : "", 0.8);
    if (other || box.micro_batch < 0) continue;
    // Sized for the widest number, so boxes of one width are all labelled or none is.
    const std::optional<double> size = LabelSize(widest_label, label_size, w);
    if (!size) continue;
    svg.Text(x + w / 2, y + h / 2, absl::StrCat(box.micro_batch),
             {.size = *size, .anchor = "middle", .fill = light ? style.light_text : style.text},
             "label");
  }

  double lx = kMargin;
  double ly = plot_bottom + kRulerHeight + kLegendLine / 2;
  for (size_t i = 0; i < legend.size(); ++i) {
    if (lx + legend_widths[i] > canvas_width - kMargin && lx > kMargin) {
      lx = kMargin;
      ly += kLegendLine;
    }
    svg.Rect(lx, ly - 6, 14, 12, legend[i].fill, "legend-swatch", "", "#9a9a9a", 0.6);
    svg.Text(lx + 20, ly, legend[i].label, {.size = kLabelSize}, "legend");
    lx += legend_widths[i];
  }
  return svg.Finish();
}

}  // namespace gpipe::trace

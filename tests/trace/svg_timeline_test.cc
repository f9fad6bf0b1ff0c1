// RenderTimelineSvg: the document is well-formed XML (checked by a small parser here), holds one
// rect per box, the per-stage bubbles and escaped titles, and stays legible for K = 16, M = 64
// by dropping labels that do not fit rather than overflowing boxes.
#include "runtime/trace/svg_timeline.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/core/file_io.h"
#include "runtime/schedule/build_program.h"
#include "runtime/schedule/simulator.h"
#include "runtime/schedule/transfers.h"
#include "runtime/trace/svg_writer.h"
#include "runtime/trace/timeline_from_simulation.h"
#include "runtime/trace/timeline_from_trace.h"
#include "tests/support/process_runner.h"

namespace gpipe::trace {
namespace {

// Checks XML well-formedness as far as the SVG writer can go wrong: every element closes in
// order, attribute values are quoted, text and attributes hold no raw '<' and only the five
// predefined entities. Returns "" or what is wrong; appends each element's name, in order.
std::string CheckWellFormed(const std::string& xml, std::vector<std::string>* element_names) {
  std::vector<std::string> open;
  size_t i = 0;
  const auto check_entities = [](const std::string& text) -> std::string {
    for (size_t at = text.find('&'); at != std::string::npos; at = text.find('&', at + 1)) {
      bool known = false;
      for (const char* entity : {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"}) {
        known = known || text.compare(at, std::string(entity).size(), entity) == 0;
      }
      if (!known) return absl::StrCat("bad entity in: ", text);
    }
    return "";
  };
  if (xml.rfind("<?xml ", 0) == 0) i = xml.find("?>") + 2;
  bool seen_root = false;
  while (i < xml.size()) {
    const size_t lt = xml.find('<', i);
    const std::string text = xml.substr(i, lt == std::string::npos ? std::string::npos : lt - i);
    if (std::string bad = check_entities(text); !bad.empty()) return bad;
    if (text.find('>') != std::string::npos) return absl::StrCat("raw '>' in text: ", text);
    if (lt == std::string::npos) break;
    const size_t gt = xml.find('>', lt);
    if (gt == std::string::npos) return "unterminated tag";
    std::string tag = xml.substr(lt + 1, gt - lt - 1);
    i = gt + 1;
    if (tag.find('<') != std::string::npos) return absl::StrCat("'<' inside tag: ", tag);
    if (tag[0] == '/') {
      if (open.empty() || open.back() != tag.substr(1)) return absl::StrCat("stray </", tag);
      open.pop_back();
      continue;
    }
    const bool self_closing = tag.back() == '/';
    if (self_closing) tag.pop_back();
    const size_t name_end = tag.find(' ');
    const std::string name = tag.substr(0, name_end);
    if (open.empty() && seen_root) return "second root element";
    seen_root = true;
    // Attributes: name="value" pairs.
    std::string rest = name_end == std::string::npos ? "" : tag.substr(name_end);
    size_t at = 0;
    while (true) {
      at = rest.find_first_not_of(' ', at);
      if (at == std::string::npos) break;
      const size_t eq = rest.find('=', at);
      if (eq == std::string::npos || eq + 1 >= rest.size() || rest[eq + 1] != '"') {
        return absl::StrCat("unquoted attribute in <", tag, ">");
      }
      const size_t close = rest.find('"', eq + 2);
      if (close == std::string::npos) return absl::StrCat("unterminated attribute in <", tag);
      if (std::string bad = check_entities(rest.substr(eq + 2, close - eq - 2)); !bad.empty()) {
        return bad;
      }
      at = close + 1;
    }
    element_names->push_back(name);
    if (!self_closing) open.push_back(name);
  }
  if (!open.empty()) return absl::StrCat("unclosed <", open.back(), ">");
  return seen_root ? "" : "no root element";
}

int CountOccurrences(const std::string& text, const std::string& what) {
  int count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++count;
  }
  return count;
}

Timeline TraceFixture() {
  absl::StatusOr<std::string> text =
      ReadWholeFile(testing::SourcePath("tests/trace/testdata/timeline_gpipe_2x2.json"));
  EXPECT_TRUE(text.ok()) << text.status();
  absl::StatusOr<Timeline> timeline = TimelineFromTrace(text.ok() ? *text : "");
  EXPECT_TRUE(timeline.ok()) << timeline.status();
  return timeline.ok() ? *timeline : Timeline();
}

Timeline Simulated(pb::Schedule kind, int stages, int micro_batches, int chunks = 1) {
  absl::StatusOr<schedule::Program> program =
      schedule::BuildProgram(kind, stages, micro_batches, chunks);
  EXPECT_TRUE(program.ok()) << program.status();
  absl::StatusOr<schedule::Simulation> simulation =
      schedule::Simulate(*program, schedule::Transfers::Collect(*program), {});
  EXPECT_TRUE(simulation.ok()) << simulation.status();
  absl::StatusOr<Timeline> timeline = TimelineFromSimulation(*program, *simulation);
  EXPECT_TRUE(timeline.ok()) << timeline.status();
  return *timeline;
}

TEST(SvgTimelineTest, TraceTimelineIsWellFormedWithOneRectPerBox) {
  const Timeline timeline = TraceFixture();
  const std::string svg = RenderTimelineSvg(timeline);
  std::vector<std::string> elements;
  EXPECT_EQ(CheckWellFormed(svg, &elements), "");
  ASSERT_FALSE(elements.empty());
  EXPECT_EQ(elements[0], "svg");
  EXPECT_TRUE(absl::StrContains(svg, "xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_EQ(CountOccurrences(svg, "class=\"box\""), static_cast<int>(timeline.boxes.size()));
  EXPECT_EQ(CountOccurrences(svg, "class=\"lane\""), 2);
}

TEST(SvgTimelineTest, ShowsEachStagesBubbleAndTheTitleFacts) {
  const std::string svg = RenderTimelineSvg(TraceFixture());
  // 1 - 600/1005 and 1 - 560/1005.
  EXPECT_TRUE(absl::StrContains(svg, ">bubble 40.3%</text>")) << svg;
  EXPECT_TRUE(absl::StrContains(svg, ">bubble 44.3%</text>")) << svg;
  EXPECT_TRUE(absl::StrContains(svg, ">stage 0</text>"));
  EXPECT_TRUE(absl::StrContains(svg, ">stage 1</text>"));
  // The plan's name is escaped, not pasted.
  EXPECT_TRUE(absl::StrContains(svg,
                                "tiny &lt;mlp&gt; &amp; co  |  GPIPE  |  K=2 stages  |  "
                                "M=2 micro-batches  |  remat EXCEPT_LAST  |  CPU"))
      << svg;
  EXPECT_TRUE(absl::StrContains(svg, ">step 1: 1.005 ms, mean bubble 42.3% (measured)</text>"));
  EXPECT_TRUE(absl::StrContains(svg, "the run failed: rank 1 (stage 1)"));
  EXPECT_TRUE(absl::StrContains(svg, "time (ms) from the start of the step"));
  // Micro-batch numbers label the boxes wide enough for them; the legend names the kinds.
  EXPECT_GE(CountOccurrences(svg, "class=\"label\""), 8);
  EXPECT_TRUE(absl::StrContains(svg, ">forward</text>"));
  EXPECT_TRUE(absl::StrContains(svg, ">backward</text>"));
  EXPECT_TRUE(absl::StrContains(svg, ">idle (bubble)</text>"));
}

TEST(SvgTimelineTest, SimulationTitleHasThePredictedBubble) {
  const Timeline timeline = Simulated(pb::GPIPE, 4, 8);
  const std::string svg = RenderTimelineSvg(timeline);
  std::vector<std::string> elements;
  EXPECT_EQ(CheckWellFormed(svg, &elements), "");
  EXPECT_TRUE(absl::StrContains(
      svg,
      "simulated step: 33.00 time units, mean bubble 27.3% (simulator&apos;s prediction 27.3%)"))
      << svg;
  EXPECT_EQ(CountOccurrences(svg, ">bubble 27.3%</text>"), 4);
  EXPECT_EQ(CountOccurrences(svg, "class=\"box\""), 64);
  EXPECT_EQ(CountOccurrences(svg, "class=\"label\""), 64);
}

TEST(SvgTimelineTest, ZeroBubbleAndInterleavedGetTheirLegendEntries) {
  const std::string zero_bubble = RenderTimelineSvg(Simulated(pb::ZERO_BUBBLE_H1, 4, 8));
  EXPECT_TRUE(absl::StrContains(zero_bubble, ">backward (input gradient)</text>"));
  EXPECT_TRUE(absl::StrContains(zero_bubble, ">backward (weight gradient)</text>"));
  const std::string interleaved = RenderTimelineSvg(Simulated(pb::INTERLEAVED_1F1B, 4, 8, 2));
  EXPECT_TRUE(absl::StrContains(interleaved, ">forward, chunk 1+</text>"));
  EXPECT_TRUE(absl::StrContains(interleaved, "INTERLEAVED_1F1B v=2"));
}

TEST(SvgTimelineTest, SixteenStagesBySixtyFourMicroBatchesStayBoundedAndDropCrampedLabels) {
  const Timeline timeline = Simulated(pb::GPIPE, 16, 64);
  const SvgTimelineOptions options;
  const std::string svg = RenderTimelineSvg(timeline, options);
  std::vector<std::string> elements;
  EXPECT_EQ(CheckWellFormed(svg, &elements), "");
  EXPECT_EQ(CountOccurrences(svg, "class=\"box\""), 16 * 64 * 2);
  EXPECT_EQ(CountOccurrences(svg, "class=\"lane\""), 16);
  // At the widest plot a forward (1 unit of 237) is about 7.6 px: too narrow for "63" even in
  // the smallest font, so no forward is labelled; a backward (2 units) is, and every one is.
  EXPECT_EQ(CountOccurrences(svg, "class=\"label\""), 16 * 64);
  const size_t width_at = svg.find("width=\"") + 7;
  const double width = std::stod(svg.substr(width_at, svg.find('"', width_at) - width_at));
  EXPECT_LE(width, options.max_plot_width + 300);
}

TEST(SvgTimelineTest, EscapesEveryMarkupCharacter) {
  EXPECT_EQ(EscapeXml("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
  EXPECT_EQ(EscapeXml(std::string("x\x01y", 3)), "x y");
  Timeline timeline;
  timeline.window_end = 1;
  timeline.rows = {{.label = "stage <0>"}};
  timeline.notes = {"rank 0: \"&\" failed"};
  timeline.boxes = {{.row = 0, .begin = 0, .end = 1, .kind = BoxKind::kForward, .name = "<F0>"}};
  MeasureRows(timeline);
  const std::string svg = RenderTimelineSvg(timeline);
  std::vector<std::string> elements;
  EXPECT_EQ(CheckWellFormed(svg, &elements), "");
  EXPECT_TRUE(absl::StrContains(svg, ">stage &lt;0&gt;</text>"));
  EXPECT_TRUE(absl::StrContains(svg, "rank 0: &quot;&amp;&quot; failed"));
  EXPECT_TRUE(absl::StrContains(svg, "<title>&lt;F0&gt;, stage &lt;0&gt;:"));
}

}  // namespace
}  // namespace gpipe::trace

// `gpipe-plan timeline` end to end: a hand-written trace of a GPIPE K=4, M=8 run and the MLP
// example plan under several schedules are drawn to SVG, rasterized with rsvg-convert (Debian
// librsvg2-bin), and the PNGs checked: signature, a sensible size. Set GPIPE_TIMELINE_PNG_DIR to
// keep the pictures for a person to look at. Also the command's usage and input errors.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "runtime/core/file_io.h"
#include "tests/support/process_runner.h"
#include "tests/support/scratch_dir.h"

namespace gpipe {
namespace {

constexpr double kTimeLimitSeconds = 60;

std::string OutputDir() {
  const char* keep = std::getenv("GPIPE_TIMELINE_PNG_DIR");
  std::string dir =
      keep != nullptr && *keep != '\0'
          ? std::string(keep)
          : absl::StrCat(::gpipe::testing::ProcessScratchDir(), "/gpipe_timeline_png");
  std::filesystem::create_directories(dir);
  return dir;
}

// rsvg-convert on PATH, or "".
std::string FindRsvgConvert() {
  const char* path = std::getenv("PATH");
  for (const absl::string_view dir :
       absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    const std::string candidate = absl::StrCat(dir, "/rsvg-convert");
    if (!dir.empty() && std::filesystem::exists(candidate)) return candidate;
  }
  return "";
}

testing::ProcessResult TimelineCommand(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {testing::BinPath("gpipe-plan"), "timeline"};
  argv.insert(argv.end(), args.begin(), args.end());
  return testing::RunProcess(argv, kTimeLimitSeconds);
}

uint32_t BigEndian32(const std::string& bytes, size_t at) {
  uint32_t value = 0;
  for (size_t i = 0; i < 4; ++i) value = value << 8 | static_cast<unsigned char>(bytes[at + i]);
  return value;
}

// Draws `source` to <name>.svg, rasterizes it to <name>.png and checks the PNG; returns the
// command's output.
std::string DrawAndRasterize(const std::string& source, const std::string& name,
                             const std::vector<std::string>& extra = {}) {
  const std::string rsvg = FindRsvgConvert();
  if (rsvg.empty()) {
    ADD_FAILURE() << "rsvg-convert not found: install librsvg2-bin (scripts/setup.sh)";
    return "";
  }
  const std::string svg = absl::StrCat(OutputDir(), "/", name, ".svg");
  const std::string png = absl::StrCat(OutputDir(), "/", name, ".png");
  std::vector<std::string> args = {source, "-o", svg};
  args.insert(args.end(), extra.begin(), extra.end());
  const testing::ProcessResult drawn = TimelineCommand(args);
  EXPECT_EQ(drawn.exit_code, 0) << drawn.output;
  const testing::ProcessResult converted =
      testing::RunProcess({rsvg, "--background-color=white", "-o", png, svg}, kTimeLimitSeconds);
  EXPECT_EQ(converted.exit_code, 0) << converted.output;
  absl::StatusOr<std::string> bytes = ReadWholeFile(png);
  if (!bytes.ok()) {
    ADD_FAILURE() << bytes.status();
    return drawn.output;
  }
  EXPECT_EQ(bytes->substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_GT(bytes->size(), 24u);
  if (bytes->size() < 24) return drawn.output;
  EXPECT_EQ(bytes->substr(12, 4), "IHDR");
  const uint32_t width = BigEndian32(*bytes, 16);
  const uint32_t height = BigEndian32(*bytes, 20);
  EXPECT_GE(width, 640u) << png;
  EXPECT_LE(width, 2400u) << png;
  EXPECT_GE(height, 150u) << png;
  EXPECT_LE(height, 1200u) << png;
  // A blank canvas compresses to almost nothing; boxes, labels and text do not.
  EXPECT_GT(bytes->size(), 10000u) << png;
  return drawn.output;
}

TEST(PngTimelineTest, TraceOfAGpipeRunRendersToPng) {
  const std::string output = DrawAndRasterize(
      testing::SourcePath("tests/trace/testdata/timeline_gpipe_4x8.json"), "trace_gpipe_4x8");
  // One summary line per stage, then where the picture went.
  for (int stage = 0; stage < 4; ++stage) {
    EXPECT_TRUE(absl::StrContains(output, absl::StrCat("stage ", stage, ": busy "))) << output;
  }
  EXPECT_TRUE(absl::StrContains(output, "trace_gpipe_4x8.svg: step 12, ")) << output;
}

TEST(PngTimelineTest, EarlierStepOfTheTraceRendersToPng) {
  const std::string output =
      DrawAndRasterize(testing::SourcePath("tests/trace/testdata/timeline_gpipe_4x8.json"),
                       "trace_gpipe_4x8_step11", {"--step", "11"});
  EXPECT_TRUE(absl::StrContains(output, "step 11, ")) << output;
}

TEST(PngTimelineTest, SimulatedPlanRendersToPng) {
  const std::string output =
      DrawAndRasterize(testing::SourcePath("examples/mlp/plan.pbtxt"), "plan_mlp_gpipe_4x8",
                       {"--override", "pipeline { stages: 4 micro_batches: 8 schedule: GPIPE }"});
  EXPECT_TRUE(absl::StrContains(output, "stage 3: busy ")) << output;
  EXPECT_TRUE(absl::StrContains(output, "time units")) << output;
}

TEST(PngTimelineTest, OtherSchedulesOfThePlanRenderToPng) {
  DrawAndRasterize(
      testing::SourcePath("examples/mlp/plan.pbtxt"), "plan_mlp_zero_bubble_h1",
      {"--override", "pipeline { stages: 4 micro_batches: 8 schedule: ZERO_BUBBLE_H1 }"});
  DrawAndRasterize(
      testing::SourcePath("examples/mlp/plan.pbtxt"), "plan_mlp_interleaved",
      {"--override",
       "pipeline { stages: 2 micro_batches: 8 schedule: INTERLEAVED_1F1B virtual_stages: 2 }"});
}

TEST(PngTimelineTest, SimulatedDevicePlanIsDrawnInMilliseconds) {
  const std::string output = DrawAndRasterize(
      testing::SourcePath("examples/sim_transformer48/plan.pbtxt"), "plan_sim_transformer48");
  EXPECT_TRUE(absl::StrContains(output, " ms, mean bubble ")) << output;
  EXPECT_FALSE(absl::StrContains(output, "time units")) << output;
}

TEST(PngTimelineTest, UsageAndInputErrorsHaveTheirExitCodes) {
  const std::string trace = testing::SourcePath("tests/trace/testdata/timeline_gpipe_4x8.json");
  const std::string plan = testing::SourcePath("examples/mlp/plan.pbtxt");
  const std::string svg = absl::StrCat(OutputDir(), "/unused.svg");
  testing::ProcessResult run = TimelineCommand({trace});
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "timeline needs -o OUT.svg")) << run.output;
  run = TimelineCommand({trace, "-o", svg, "--override", "pipeline { stages: 2 }"});
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "--override goes with a plan")) << run.output;
  run = TimelineCommand({plan, "-o", svg, "--step", "3"});
  EXPECT_EQ(run.exit_code, 2) << run.output;
  run = TimelineCommand({trace, "-o", svg, "--step", "99"});
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "step 99 is not in the trace; it holds steps 11-12"))
      << run.output;
  run = TimelineCommand({"/nonexistent/trace.json", "-o", svg});
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "/nonexistent/trace.json")) << run.output;
  run = TimelineCommand({plan, "-o", svg, "--override", "pipeline { stages: 0 }"});
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_FALSE(std::filesystem::exists(svg));
}

}  // namespace
}  // namespace gpipe

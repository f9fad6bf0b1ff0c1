// gpipe-plan: inspect a plan without running it.
//   gpipe-plan check PLAN [--override TEXT]... [-n N]   validate; print the stage table
//   gpipe-plan show  PLAN [--override TEXT]... [--compare]
//                                 also the schedule grid, bubble, memory; --compare: every
//                                 schedule that fits, side by side
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "launcher/flags.h"
#include "layers/registry.h"
#include "runtime/coord/plan_report.h"
#include "runtime/plan/plan_analysis.h"
#include "runtime/plan/plan_loader.h"

namespace {

constexpr char kUsage[] =
    "usage: gpipe-plan check PLAN [--override TEXT]... [-n N]\n"
    "       gpipe-plan show  PLAN [--override TEXT]... [--compare]\n"
    "  check      validate the plan (errors as file:line:col) and print its stages\n"
    "  show       also draw the schedule as a stage x time grid with the simulated step time,\n"
    "             bubble and per-stage peak memory by kind\n"
    "  --compare  (show) then the same figures for every schedule that fits the plan\n"
    "  -n N       (check) also verify that a job of N processes fits the plan\n"
    "exit code: 0 valid, 1 invalid plan, 2 usage error\n";

int Fail(const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  auto flags = gpipe::ParseFlags(
      {{"override", true, true}, {"n"}, {"compare", false}, {"help", false}}, args);
  if (!flags.ok()) {
    std::fprintf(stderr, "gpipe-plan: %s\n%s", std::string(flags.status().message()).c_str(),
                 kUsage);
    return 2;
  }
  if (flags->Has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const auto& positional = flags->positional();
  if (positional.size() != 2 || (positional[0] != "check" && positional[0] != "show")) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const bool show = positional[0] == "show";
  if (show && flags->Has("n")) {
    std::fputs("gpipe-plan: -n goes with check\n", stderr);
    return 2;
  }
  if (!show && flags->Has("compare")) {
    std::fputs("gpipe-plan: --compare goes with show\n", stderr);
    return 2;
  }
  auto loaded = gpipe::LoadPlanFile(positional[1], flags->GetAll("override"));
  if (!loaded.ok()) return Fail(std::string(loaded.status().message()));
  const gpipe::LayerRegistry registry = gpipe::LayerRegistry::WithBuiltins();
  auto analyzed = gpipe::AnalyzePlan(*loaded, registry);
  if (!analyzed.ok()) return Fail(std::string(analyzed.status().message()));
  if (auto n = flags->Get("n")) {
    auto parsed = gpipe::ParseIntFlag("-n", *n);
    if (!parsed.ok()) return Fail(std::string(parsed.status().message()));
    const absl::Status fits = gpipe::CheckWorldSize(*analyzed, *loaded, static_cast<int>(*parsed));
    if (!fits.ok()) return Fail(std::string(fits.message()));
  }
  auto report = gpipe::FormatPlanReport(*analyzed, registry, show);
  if (!report.ok()) return Fail(std::string(report.status().message()));
  std::fputs(report->c_str(), stdout);
  if (flags->Has("compare")) {
    auto comparison = gpipe::FormatScheduleComparison(*loaded, registry);
    if (!comparison.ok()) return Fail(std::string(comparison.status().message()));
    std::printf("\n%s", comparison->c_str());
  }
  return 0;
}

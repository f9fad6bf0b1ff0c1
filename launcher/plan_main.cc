// gpipe-plan: inspect a plan without running it.
//   gpipe-plan check PLAN [--override TEXT]... [-n N]   validate; print the stage table
//   gpipe-plan show  PLAN [--override TEXT]... [--compare]
//                                 also the schedule grid, bubble, memory; --compare: every
//                                 schedule that fits, side by side
//   gpipe-plan timeline SOURCE -o OUT.svg [--step N] [--override TEXT]...
//                                 the GPipe-paper stage x time picture of a traced step, or of
//                                 a plan's simulated step
//   gpipe-plan profile PLAN -o OUT.json [--override TEXT]... [--repeats N] [--device cpu|cuda]
//                                 time each layer on this machine's CPU (or first GPU): the
//                                 cost profile that
//                                 runtime { device: SIM sim { profile: ... } } reads
//   gpipe-plan balance PLAN [--stages K] [--memory-limit BYTES] [-o OUT.pbtxt] [--override TEXT]...
//                                 stage boundaries by measured cost and memory
//   gpipe-plan field PLAN NAME [--override TEXT]...
//                                 one field's value after the overrides (for scripts)
//   gpipe-plan hf-config PLAN -o config.json [--dtype F32|BF16] [--override TEXT]...
//                                 the Hugging Face config.json of a Llama plan's export
//   gpipe-plan export-schedule PLAN -o OUT.csv [--override TEXT]...
//                                 the plan's schedule as a PyTorch compute-schedule CSV
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/text_format.h"
#include "launcher/flags.h"
#include "layers/registry.h"
#include "runtime/backend/standalone_device.h"
#include "runtime/ckpt/hf_config.h"
#include "runtime/core/file_io.h"
#include "runtime/core/file_ownership.h"
#include "runtime/core/status_macros.h"
#include "runtime/estimate/layer_profiler.h"
#include "runtime/estimate/plan_balance.h"
#include "runtime/estimate/plan_report.h"
#include "runtime/estimate/resolve_plan.h"
#include "runtime/estimate/schedule_prediction.h"
#include "runtime/plan/plan_analysis.h"
#include "runtime/plan/plan_field.h"
#include "runtime/plan/plan_loader.h"
#include "runtime/schedule/build_program.h"
#include "runtime/schedule/schedule_csv.h"
#include "runtime/trace/svg_timeline.h"
#include "runtime/trace/timeline_from_simulation.h"
#include "runtime/trace/timeline_from_trace.h"

namespace {

constexpr char kUsage[] =
    "usage: gpipe-plan check PLAN [--override TEXT]... [-n N]\n"
    "       gpipe-plan show  PLAN [--override TEXT]... [--compare]\n"
    "       gpipe-plan timeline SOURCE -o OUT.svg [--step N] [--override TEXT]...\n"
    "       gpipe-plan profile PLAN -o OUT.json [--override TEXT]... [--repeats N]"
    " [--device cpu|cuda]\n"
    "       gpipe-plan balance PLAN [--stages K] [--memory-limit BYTES] [-o OUT.pbtxt]"
    " [--override TEXT]...\n"
    "       gpipe-plan field PLAN NAME [--override TEXT]...\n"
    "       gpipe-plan hf-config PLAN -o config.json [--dtype F32|BF16] [--override TEXT]...\n"
    "       gpipe-plan export-schedule PLAN -o OUT.csv [--override TEXT]...\n"
    "  check      validate the plan (errors as file:line:col) and print its stages\n"
    "  show       also draw the schedule as a stage x time grid with the simulated step time,\n"
    "             bubble and per-stage peak memory by kind\n"
    "  --compare  (show) then the same figures for every schedule that fits the plan\n"
    "  -n N       (check) also verify that a job of N processes fits the plan\n"
    "  timeline   draw one step as stages x time boxes (GPipe paper figure 2) into an SVG and\n"
    "             print each stage's busy time and bubble. SOURCE is a trace JSON written by\n"
    "             runtime { trace: ... } (measured, in ms) or a plan (simulated as `show`\n"
    "             predicts it)\n"
    "  profile    time every layer's forward, backward-input and backward-weight on this\n"
    "             machine's CPU (runtime.threads threads) or, with --device cuda, its first\n"
    "             GPU (the plan's micro-batch size; median of --repeats runs, default 5) and\n"
    "             write the JSON cost profile that\n"
    "             runtime { device: SIM sim { profile: ... } } reads\n"
    "  --device D (profile) cpu (default) or cuda\n"
    "  balance    choose the stage boundaries with the least predicted step time whose stages\n"
    "             all fit --memory-limit bytes (parameters, gradients, optimizer state and the\n"
    "             schedule's live activations), costing layers by runtime.sim (layer_costs, a\n"
    "             `profile` JSON in sim.profile, or FLOPs at sim.peak_gflops); print it beside\n"
    "             balance PARAMETERS, balance FLOPS and equal layer counts, and with -o write\n"
    "             the plan with those boundaries\n"
    "  field      print the value of one field, by its dotted name (e.g. checkpoint.dir), of\n"
    "             the plan with its overrides merged: a string as it is, an enum by its name;\n"
    "             an unset field prints its default (empty for a string without one)\n"
    "  hf-config  write the Hugging Face config.json (LlamaForCausalLM) that from_pretrained\n"
    "             reads beside the plan's --export, for a plan with layers model.embed_tokens,\n"
    "             model.layers.N (llama_block), model.norm (rms_norm) and lm_head\n"
    "  --dtype D  (hf-config) torch_dtype of the exported weights: F32 (default) or BF16, as\n"
    "             --export-dtype\n"
    "  export-schedule  write the plan's training schedule, any built-in or CUSTOM, as PyTorch's\n"
    "             pipelining compute-schedule CSV (one row per stage, actions <stage>F<mb>,\n"
    "             B, I, W), which pipeline { schedule: CUSTOM schedule_csv: ... } reads back\n"
    "  --stages K (balance) the number of stages (default: the plan's pipeline.stages)\n"
    "  -o OUT     (timeline) where to write the picture; (profile) the profile; (balance) the\n"
    "             balanced plan; (hf-config) the config; (export-schedule) the CSV\n"
    "  --step N   (timeline, trace) the training step to draw; default: the last one every\n"
    "             rank completed\n"
    "  --override (check, show, profile, balance, export-schedule, timeline of a plan) a plan text "
    "merged over the file\n"
    "exit code: 0 valid, 1 invalid plan or trace, 2 usage error\n";

int Fail(const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  return 1;
}

int Usage(const char* message) {
  std::fprintf(stderr, "gpipe-plan: %s\n%s", message, kUsage);
  return 2;
}

// -o is checked before any work: it may not be the file read (balance would replace the plan with
// a comment-less copy). Returns the exit code for a refused output, 0 when it may be written.
int CheckOutput(const std::string& out, const std::string& source, const char* source_role) {
  const absl::Status owned = gpipe::CheckRunFiles(gpipe::RunFiles{
      .inputs = {{.role = source_role, .path = source}}, .outputs = {{.role = "-o", .path = out}}});
  if (owned.ok()) return 0;
  std::fprintf(stderr, "gpipe-plan: %s\n", std::string(owned.message()).c_str());
  return 2;
}

// A trace is a JSON object; a plan is protobuf text, which never starts with '{'.
bool LooksLikeJson(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  return first != std::string::npos && text[first] == '{';
}

// The plan's schedule as `gpipe-plan show` predicts it (same simulation, same costs).
absl::StatusOr<gpipe::trace::Timeline> SimulatedTimeline(
    const std::string& path, const std::vector<std::string>& overrides) {
  ASSIGN_OR_RETURN(const gpipe::ResolvedPlan resolved,
                   gpipe::ResolvePlan(gpipe::PlanFile{.path = path}, overrides,
                                      gpipe::LayerRegistry::WithBuiltins()));
  const gpipe::AnalyzedPlan& analyzed = resolved.analyzed;
  ASSIGN_OR_RETURN(const gpipe::SchedulePrediction prediction,
                   gpipe::PredictSchedule(analyzed, resolved.registry));
  ASSIGN_OR_RETURN(gpipe::trace::Timeline timeline,
                   gpipe::trace::TimelineFromSimulation(prediction.program, prediction.simulation));
  const gpipe::pb::Plan& plan = analyzed.plan;
  timeline.plan = plan.name();
  timeline.remat = gpipe::pb::Remat_Name(plan.pipeline().remat());
  timeline.device = gpipe::pb::Device_Name(plan.runtime().device());
  // PredictSchedule times the simulated device in ms from its cost table, others in FLOP units.
  if (plan.runtime().device() == gpipe::pb::SIM) {
    timeline.unit = gpipe::trace::TimeUnit::kMilliseconds;
    timeline.unit_note = "on the simulated device, from runtime.sim's costs";
  } else {
    timeline.unit_note = "1 unit = a mean stage's forward";
  }
  return timeline;
}

int TimelineMain(const gpipe::ParsedFlags& flags, const std::string& source) {
  if (flags.Has("n") || flags.Has("compare")) return Usage("-n and --compare go with check/show");
  const std::optional<std::string> out = flags.Get("o");
  if (!out) return Usage("timeline needs -o OUT.svg");
  if (int refused = CheckOutput(*out, source, "the plan or trace"); refused != 0) return refused;
  auto text = gpipe::ReadWholeFile(source);
  if (!text.ok()) return Fail(std::string(text.status().message()));
  absl::StatusOr<gpipe::trace::Timeline> timeline;
  if (LooksLikeJson(*text)) {
    if (flags.Has("override")) return Usage("--override goes with a plan, not a trace");
    gpipe::trace::TraceTimelineOptions options;
    if (auto step = flags.Get("step")) {
      auto parsed = gpipe::ParseIntFlag("--step", *step);
      if (!parsed.ok()) return Usage(std::string(parsed.status().message()).c_str());
      options.step = *parsed;
    }
    timeline = gpipe::trace::TimelineFromTrace(*text, options);
    if (!timeline.ok()) return Fail(absl::StrCat(source, ": ", timeline.status().message()));
  } else {
    if (flags.Has("step")) return Usage("--step goes with a trace, not a plan");
    timeline = SimulatedTimeline(source, flags.GetAll("override"));
    if (!timeline.ok()) return Fail(std::string(timeline.status().message()));
  }
  const absl::Status written =
      gpipe::WriteFileAtomically(*out, gpipe::trace::RenderTimelineSvg(*timeline));
  if (!written.ok()) return Fail(std::string(written.message()));
  for (const std::string& note : timeline->notes) {
    std::fprintf(stderr, "note: %s\n", note.c_str());
  }
  std::fputs(gpipe::trace::FormatRowSummary(*timeline).c_str(), stdout);
  std::printf("wrote %s: %s%.3f %s, mean bubble %.1f%%\n", out->c_str(),
              timeline->step ? absl::StrCat("step ", *timeline->step, ", ").c_str() : "",
              timeline->window(), gpipe::trace::TimeUnitName(timeline->unit),
              100.0 * timeline->MeanBubble());
  return 0;
}

int ProfileMain(const gpipe::ParsedFlags& flags, const std::string& plan_path) {
  if (flags.Has("n") || flags.Has("compare") || flags.Has("step")) {
    return Usage("-n, --compare and --step do not go with profile");
  }
  const std::optional<std::string> out = flags.Get("o");
  if (!out) return Usage("profile needs -o OUT.json");
  if (int refused = CheckOutput(*out, plan_path, "the plan"); refused != 0) return refused;
  gpipe::ProfileOptions options;
  if (auto repeats = flags.Get("repeats")) {
    auto parsed = gpipe::ParseIntFlag("--repeats", *repeats);
    if (!parsed.ok() || *parsed < 1) return Usage("--repeats takes a count >= 1");
    options.repeats = static_cast<int>(*parsed);
  }
  // Layers are timed one by one: the partition does not matter, and a PROFILE balance would
  // need the profile being written.
  auto resolved = gpipe::ResolvePlan(gpipe::PlanFile{.path = plan_path}, flags.GetAll("override"),
                                     gpipe::LayerRegistry::WithBuiltins(),
                                     gpipe::ResolveOptions{.resolve_profile_balance = false});
  if (!resolved.ok()) return Fail(std::string(resolved.status().message()));
  const gpipe::AnalyzedPlan& analyzed = resolved->analyzed;
  options.threads = analyzed.plan.runtime().threads();
  gpipe::pb::Runtime runtime = analyzed.plan.runtime();
  auto device_kind = gpipe::StandaloneDeviceFromName(flags.Get("device").value_or("cpu"));
  if (!device_kind.ok()) return Usage(std::string(device_kind.status().message()).c_str());
  runtime.set_device(*device_kind);
  // A GPU's kernels run asynchronously on its own clock: only wall time (the profiler waits for
  // the device after each timed call) measures them.
  if (*device_kind != gpipe::pb::CPU) options.clock = gpipe::ProfileClock::kWall;
  auto device = gpipe::CreateStandaloneDevice(runtime);
  if (!device.ok()) return Fail(std::string(device.status().message()));
  auto profile = gpipe::ProfileAnalyzedPlanLayers(analyzed, resolved->registry, **device, options);
  if (!profile.ok()) return Fail(std::string(profile.status().message()));
  const absl::Status written = gpipe::WriteFileAtomically(*out, *profile);
  if (!written.ok()) return Fail(std::string(written.message()));
  std::printf("wrote %s\n", out->c_str());
  return 0;
}

int BalanceMain(const gpipe::ParsedFlags& flags, const std::string& plan_path) {
  if (flags.Has("n") || flags.Has("compare") || flags.Has("step") || flags.Has("repeats") ||
      flags.Has("device")) {
    return Usage("-n, --compare, --step, --repeats and --device do not go with balance");
  }
  if (auto out = flags.Get("o")) {
    if (int refused = CheckOutput(*out, plan_path, "the plan"); refused != 0) return refused;
  }
  gpipe::BalanceOptions options;
  if (auto stages = flags.Get("stages")) {
    auto parsed = gpipe::ParseIntFlag("--stages", *stages);
    if (!parsed.ok() || *parsed < 1) return Usage("--stages takes a count >= 1");
    options.stages = static_cast<int>(*parsed);
  }
  if (auto limit = flags.Get("memory-limit")) {
    auto parsed = gpipe::ParseByteCountFlag("--memory-limit", *limit);
    if (!parsed.ok()) return Usage(std::string(parsed.status().message()).c_str());
    options.memory_limit = *parsed;
  }
  auto loaded = gpipe::LoadPlanFile(plan_path, flags.GetAll("override"));
  if (!loaded.ok()) return Fail(std::string(loaded.status().message()));
  const gpipe::LayerRegistry registry = gpipe::LayerRegistry::WithBuiltins();
  auto result = gpipe::BalancePlan(*loaded, registry, options);
  if (!result.ok()) return Fail(std::string(result.status().message()));
  std::fputs(gpipe::FormatBalance(*result, options.memory_limit).c_str(), stdout);
  if (auto out = flags.Get("o")) {
    std::string text;
    if (!google::protobuf::TextFormat::PrintToString(result->plan, &text)) {
      return Fail("balance: the balanced plan could not be printed");
    }
    const absl::Status written = gpipe::WriteFileAtomically(
        *out, absl::StrCat("# ", plan_path, ", balanced by gpipe-plan balance\n", text));
    if (!written.ok()) return Fail(std::string(written.message()));
    std::printf("wrote %s\n", out->c_str());
  }
  return 0;
}

int FieldMain(const gpipe::ParsedFlags& flags, const std::string& plan_path,
              const std::string& name) {
  if (flags.Has("n") || flags.Has("compare") || flags.Has("o") || flags.Has("step") ||
      flags.Has("repeats") || flags.Has("device") || flags.Has("stages") ||
      flags.Has("memory-limit")) {
    return Usage("field takes only --override");
  }
  auto loaded = gpipe::LoadPlanFile(plan_path, flags.GetAll("override"));
  if (!loaded.ok()) return Fail(std::string(loaded.status().message()));
  auto value = gpipe::PlanFieldValue(loaded->plan, name);
  if (!value.ok()) return Usage(std::string(value.status().message()).c_str());
  std::printf("%s\n", value->c_str());
  return 0;
}

int HfConfigMain(const gpipe::ParsedFlags& flags, const std::string& plan_path) {
  if (flags.Has("n") || flags.Has("compare") || flags.Has("step") || flags.Has("repeats") ||
      flags.Has("device") || flags.Has("stages") || flags.Has("memory-limit")) {
    return Usage("hf-config takes only -o, --dtype and --override");
  }
  const std::optional<std::string> out = flags.Get("o");
  if (!out) return Usage("hf-config needs -o config.json");
  if (int refused = CheckOutput(*out, plan_path, "the plan"); refused != 0) return refused;
  const std::string dtype = flags.Get("dtype").value_or("F32");
  if (dtype != "F32" && dtype != "BF16") return Usage("--dtype takes F32 or BF16");
  auto loaded = gpipe::LoadPlanFile(plan_path, flags.GetAll("override"));
  if (!loaded.ok()) return Fail(std::string(loaded.status().message()));
  auto json =
      gpipe::LlamaHfConfigJson(loaded->plan.model(), dtype == "F32" ? "float32" : "bfloat16");
  if (!json.ok()) return Fail(std::string(json.status().message()));
  const absl::Status written = gpipe::WriteFileAtomically(*out, *json);
  if (!written.ok()) return Fail(std::string(written.message()));
  std::printf("wrote %s\n", out->c_str());
  return 0;
}

int ExportScheduleMain(const gpipe::ParsedFlags& flags, const std::string& plan_path) {
  if (flags.Has("n") || flags.Has("compare") || flags.Has("step") || flags.Has("repeats") ||
      flags.Has("device") || flags.Has("stages") || flags.Has("memory-limit") ||
      flags.Has("dtype")) {
    return Usage("export-schedule takes only -o and --override");
  }
  const std::optional<std::string> out = flags.Get("o");
  if (!out) return Usage("export-schedule needs -o OUT.csv");
  if (int refused = CheckOutput(*out, plan_path, "the plan"); refused != 0) return refused;
  auto resolved = gpipe::ResolvePlan(gpipe::PlanFile{.path = plan_path}, flags.GetAll("override"),
                                     gpipe::LayerRegistry::WithBuiltins());
  if (!resolved.ok()) return Fail(std::string(resolved.status().message()));
  auto program = gpipe::schedule::BuildPipelineProgram(resolved->analyzed.plan.pipeline());
  if (!program.ok()) return Fail(std::string(program.status().message()));
  auto csv = gpipe::schedule::ScheduleCsv(*program);
  if (!csv.ok()) return Fail(std::string(csv.status().message()));
  const absl::Status written = gpipe::WriteFileAtomically(*out, *csv);
  if (!written.ok()) return Fail(std::string(written.message()));
  std::printf("wrote %s\n", out->c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  auto flags = gpipe::ParseFlags({{"override", true, true},
                                  {"n"},
                                  {"compare", false},
                                  {"help", false},
                                  {"o"},
                                  {"step"},
                                  {"repeats"},
                                  {"device"},
                                  {"stages"},
                                  {"memory-limit"},
                                  {"dtype"}},
                                 args);
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
  if (positional.size() == 2 && positional[0] == "timeline") {
    return TimelineMain(*flags, positional[1]);
  }
  if (positional.size() == 2 && positional[0] == "profile") {
    return ProfileMain(*flags, positional[1]);
  }
  if (positional.size() == 3 && positional[0] == "field") {
    return FieldMain(*flags, positional[1], positional[2]);
  }
  if (positional.size() == 2 && positional[0] == "export-schedule") {
    return ExportScheduleMain(*flags, positional[1]);
  }
  if (positional.size() == 2 && positional[0] == "balance") {
    return BalanceMain(*flags, positional[1]);
  }
  if (positional.size() == 2 && positional[0] == "hf-config") {
    return HfConfigMain(*flags, positional[1]);
  }
  if (flags->Has("dtype")) {
    std::fputs("gpipe-plan: --dtype goes with hf-config\n", stderr);
    return 2;
  }
  if (flags->Has("stages") || flags->Has("memory-limit")) {
    std::fputs("gpipe-plan: --stages and --memory-limit go with balance\n", stderr);
    return 2;
  }
  if (flags->Has("o") || flags->Has("step") || flags->Has("repeats") || flags->Has("device")) {
    std::fputs(
        "gpipe-plan: -o, --step, --repeats and --device go with timeline, profile or balance\n",
        stderr);
    return 2;
  }
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
  auto resolved =
      gpipe::ResolvePlan(gpipe::PlanFile{.path = positional[1]}, flags->GetAll("override"),
                         gpipe::LayerRegistry::WithBuiltins());
  if (!resolved.ok()) return Fail(std::string(resolved.status().message()));
  const gpipe::LoadedPlan& loaded = resolved->loaded;
  const gpipe::AnalyzedPlan& analyzed = resolved->analyzed;
  const gpipe::LayerRegistry& registry = resolved->registry;
  if (auto n = flags->Get("n")) {
    auto parsed = gpipe::ParseIntFlag("-n", *n);
    if (!parsed.ok()) return Fail(std::string(parsed.status().message()));
    const absl::Status fits = gpipe::CheckWorldSize(analyzed, loaded, static_cast<int>(*parsed));
    if (!fits.ok()) return Fail(std::string(fits.message()));
  }
  auto report = gpipe::FormatPlanReport(analyzed, registry, show);
  if (!report.ok()) return Fail(std::string(report.status().message()));
  std::fputs(report->c_str(), stdout);
  if (flags->Has("compare")) {
    auto comparison = gpipe::FormatScheduleComparison(loaded, registry);
    if (!comparison.ok()) return Fail(std::string(comparison.status().message()));
    std::printf("\n%s", comparison->c_str());
  }
  return 0;
}

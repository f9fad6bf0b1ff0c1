// The simulated accelerator end to end: real gpipe-worker jobs under mpirun with
// runtime { device: SIM } on 8 and 16 ranks (many more than the cores), under GPipe and 1F1B;
// per-stage peak memory from --metrics-out against `gpipe-plan show`'s prediction (computed
// here the same way, with PredictSchedule); a 16 GiB model that runs without the memory; and a
// bad cost entry rejected at its plan location. No timing assertions.
#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "layers/registry.h"
#include "runtime/estimate/schedule_prediction.h"
#include "runtime/plan/plan_analysis.h"
#include "runtime/plan/plan_loader.h"
#include "tests/support/process_runner.h"
#include "tests/support/scratch_dir.h"

namespace gpipe {
namespace {

constexpr double kJobLimitSeconds = 240;

// 16 uniform linear layers (the last one makes the 10 class scores), SGD, synthetic data.
std::string UniformPlan() {
  std::string layers;
  for (int i = 0; i < 16; ++i) {
    absl::StrAppend(&layers, "  layers { name: 'fc", i, "' linear { out_features: ",
                    i == 15 ? 10 : 64, " } }\n");
  }
  return absl::StrCat(R"pb(
name: "sim-uniform"
model {
  input { shape: [64] }
)pb",
                      layers, R"pb(
  loss { softmax_cross_entropy {} }
}
pipeline { stages: 16 micro_batches: 32 schedule: GPIPE remat: NEVER }
training { global_batch: 64 steps: 2 optimizer { sgd { lr: 0.1 momentum: 0.9 } } }
data { synthetic { num_samples: 256 } }
runtime {
  device: SIM
  log_every: 1
  timeouts { wait_seconds: 60 }
  sim { peak_gflops: 1 link_latency_us: 5 layer_costs { layer: "fc3" forward_us: 200 } }
}
)pb");
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = absl::StrCat(::gpipe::testing::ProcessScratchDir(), "/", name);
  std::ofstream(path) << text;
  return path;
}

testing::ProcessResult RunJob(int ranks, const std::string& plan,
                              const std::vector<std::string>& flags) {
  std::vector<std::string> argv = testing::MpirunPrefix(ranks);
  argv.insert(argv.end(), {testing::BinPath("gpipe-worker"), "--plan", plan});
  argv.insert(argv.end(), flags.begin(), flags.end());
  return testing::RunProcess(argv, kJobLimitSeconds);
}

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The integers of `"key":[...]` in a one-line JSON object.
std::vector<int64_t> IntList(const std::string& line, const std::string& key) {
  const std::string needle = absl::StrCat("\"", key, "\":[");
  const size_t at = line.find(needle);
  if (at == std::string::npos) return {};
  const size_t begin = at + needle.size();
  std::vector<int64_t> out;
  for (absl::string_view item :
       absl::StrSplit(line.substr(begin, line.find(']', begin) - begin), ',')) {
    int64_t value = 0;
    if (absl::SimpleAtoi(item, &value)) out.push_back(value);
  }
  return out;
}

SchedulePrediction Predict(const std::string& plan, const std::vector<std::string>& overrides) {
  absl::StatusOr<LoadedPlan> loaded = LoadPlanFile(plan, overrides);
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  const LayerRegistry registry = LayerRegistry::WithBuiltins();
  absl::StatusOr<AnalyzedPlan> analyzed = AnalyzePlan(*loaded, registry);
  EXPECT_TRUE(analyzed.ok()) << analyzed.status();
  absl::StatusOr<SchedulePrediction> prediction = PredictSchedule(*analyzed, registry);
  EXPECT_TRUE(prediction.ok()) << prediction.status();
  return *std::move(prediction);
}

TEST(SimTest, RunsManyRanksAndMatchesThePredictedMemory) {
  const std::string plan = WriteFile("sim_uniform.pbtxt", UniformPlan());
  struct Case {
    int ranks;
    const char* schedule;
    const char* precision = "FP32";  // BF16: activations and boundary tensors stored as bf16
  };
  for (const Case& c :
       {Case{16, "GPIPE"}, Case{16, "ONE_F_ONE_B"}, Case{8, "GPIPE"}, Case{8, "ONE_F_ONE_B"},
        Case{8, "GPIPE", "BF16"}, Case{8, "ONE_F_ONE_B", "BF16"}}) {
    SCOPED_TRACE(absl::StrCat(c.ranks, " ranks, ", c.schedule, ", ", c.precision));
    const std::vector<std::string> overrides = {
        absl::StrCat("pipeline { stages: ", c.ranks, " schedule: ", c.schedule, " }"),
        absl::StrCat("training { precision: ", c.precision, " }")};
    const std::string metrics = absl::StrCat(::gpipe::testing::ProcessScratchDir(), "/sim_",
                                             c.ranks, "_", c.schedule, "_", c.precision, ".jsonl");
    const testing::ProcessResult run =
        RunJob(c.ranks, plan,
               {"--override", overrides[0], "--override", overrides[1], "--metrics-out", metrics});
    ASSERT_EQ(run.exit_code, 0) << run.output;
    EXPECT_TRUE(absl::StrContains(run.output, "step 2/2")) << run.output;
    const std::vector<std::string> lines = Lines(metrics);
    ASSERT_EQ(lines.size(), 2u);
    // The second step: the optimizer's momentum buffers exist from the first update on.
    const std::string& step = lines.back();
    const std::vector<int64_t> boundary = IntList(step, "peak_boundary_bytes");
    const std::vector<int64_t> activation = IntList(step, "peak_activation_bytes");
    const std::vector<int64_t> boundary_grad = IntList(step, "peak_boundary_grad_bytes");
    const std::vector<int64_t> peak = IntList(step, "peak_bytes");
    const SchedulePrediction predicted = Predict(plan, overrides);
    ASSERT_EQ(boundary.size(), static_cast<size_t>(c.ranks)) << step;
    ASSERT_EQ(predicted.activations.size(), static_cast<size_t>(c.ranks));
    for (int s = 0; s < c.ranks; ++s) {
      SCOPED_TRACE(absl::StrCat("stage ", s));
      const StageActivationMemory& p = predicted.activations[s];
      EXPECT_EQ(boundary[s], p.boundary);
      EXPECT_EQ(boundary_grad[s], p.boundary_grad);
      // As on the CPU: the prediction holds at instruction boundaries; inside a backward the
      // input gradient forms while the output gradient is alive (one [2, 64] f32 tensor more).
      EXPECT_GE(activation[s], p.activation);
      EXPECT_LE(activation[s], p.activation + 2 * 64 * 4);
      if (s > 0 && s < c.ranks - 1) {  // no data tensors: parameters, state and activations only
        EXPECT_GE(peak[s], predicted.parameter_bytes[s] + p.total);
        EXPECT_LE(peak[s], predicted.parameter_bytes[s] + p.total + 2 * 64 * 4);
      }
    }
  }
}

// pipeline.offload on SIM: the bytes moved are the predicted ones, and over a fast host link the
// device's boundary peak and the host's peak are too, give or take one input whose modelled copy
// (20 ns) had not ended when it was polled (each side lets go of a copy's source once the copy has
// ended); over a slow host link the backwards wait for their inputs and the step report says for
// how long.
TEST(SimTest, OffloadedStageInputsMatchThePredictionAndSlowLinksShowAsWaits) {
  const std::string plan = WriteFile("sim_offload.pbtxt", UniformPlan());
  const int64_t input_bytes = 2 * 64 * 4;  // one micro-batch of 2 samples, [64] f32
  struct Case {
    const char* link;
    bool slow;
  };
  for (const Case& c : {Case{"25", false}, Case{"0.0001", true}}) {
    SCOPED_TRACE(absl::StrCat("host link ", c.link, " GB/s"));
    const std::vector<std::string> overrides = {
        "pipeline { stages: 8 remat: ALWAYS offload: STAGE_INPUTS }",
        absl::StrCat("runtime { sim { host_link_gbps: ", c.link, " } }")};
    const std::string metrics =
        absl::StrCat(::gpipe::testing::ProcessScratchDir(), "/sim_offload_", c.slow, ".jsonl");
    const testing::ProcessResult run =
        RunJob(8, plan,
               {"--override", overrides[0], "--override", overrides[1], "--metrics-out", metrics});
    ASSERT_EQ(run.exit_code, 0) << run.output;
    EXPECT_TRUE(absl::StrContains(run.output, "| offload ")) << run.output;
    const std::vector<std::string> lines = Lines(metrics);
    ASSERT_EQ(lines.size(), 2u);
    const std::string& step = lines.back();
    const std::vector<int64_t> boundary = IntList(step, "peak_boundary_bytes");
    const std::vector<int64_t> host = IntList(step, "peak_offload_bytes");
    const std::vector<int64_t> moved = IntList(step, "offloaded_bytes");
    const SchedulePrediction predicted = Predict(plan, overrides);
    ASSERT_EQ(host.size(), 8u) << step;
    ASSERT_EQ(moved.size(), 8u) << step;
    for (int s = 0; s < 8; ++s) {
      SCOPED_TRACE(absl::StrCat("stage ", s));
      const StageActivationMemory& p = predicted.activations[s];
      // GPipe with 32 micro-batches: all but the last wait in host memory.
      EXPECT_EQ(p.offloaded, 31 * input_bytes);
      EXPECT_EQ(moved[s], p.offloaded);
      if (!c.slow) {
        EXPECT_GE(host[s], p.host);
        EXPECT_LE(host[s], p.host + input_bytes);
        EXPECT_GE(boundary[s], p.boundary);
        EXPECT_LE(boundary[s], p.boundary + input_bytes);
      }
    }
    // 512 bytes at 0.1 MB/s take 5.12 ms a copy, far longer than a stage's compute: backwards
    // wait on some stage (which depends on the pipeline's timing).
    const size_t at = step.find("\"offload_wait_ms\":[");
    ASSERT_NE(at, std::string::npos) << step;
    double longest_wait = 0;
    for (absl::string_view item :
         absl::StrSplit(step.substr(at + 19, step.find(']', at) - at - 19), ',')) {
      double wait = 0;
      ASSERT_TRUE(absl::SimpleAtod(item, &wait)) << step;
      longest_wait = std::max(longest_wait, wait);
    }
    if (c.slow) {
      EXPECT_GT(longest_wait, 2.5) << step;
    } else {
      EXPECT_LT(longest_wait, 1.0) << step;
    }
  }
}

TEST(SimTest, AHugeModelRunsWithoutItsMemory) {
  // 16 x linear 16384x16384: 16 GiB of parameters (and as much again in gradients).
  std::string layers;
  for (int i = 0; i < 16; ++i) {
    absl::StrAppend(&layers, "  layers { name: 'big", i,
                    "' linear { out_features: 16384 bias: false } }\n");
  }
  const std::string plan = WriteFile("sim_huge.pbtxt", absl::StrCat(R"pb(
name: "sim-huge"
model {
  input { shape: [16384] }
)pb",
                                                                     layers, R"pb(
  loss { softmax_cross_entropy {} }
}
pipeline { stages: 16 micro_batches: 16 schedule: ONE_F_ONE_B }
training { global_batch: 16 steps: 1 optimizer { sgd { lr: 0.1 } } }
data { synthetic { num_samples: 64 } }
runtime { device: SIM timeouts { wait_seconds: 60 } sim { peak_gflops: 1000000 } }
)pb"));
  const std::string metrics =
      absl::StrCat(::gpipe::testing::ProcessScratchDir(), "/sim_huge.jsonl");
  const testing::ProcessResult run = RunJob(16, plan, {"--metrics-out", metrics});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::vector<std::string> lines = Lines(metrics);
  ASSERT_EQ(lines.size(), 1u);
  const std::vector<int64_t> peak = IntList(lines.front(), "peak_bytes");
  ASSERT_EQ(peak.size(), 16u);
  for (int s = 0; s < 16; ++s) {
    // One layer per stage: 1 GiB of weights and 1 GiB of gradients, counted but never held.
    EXPECT_GE(peak[s], int64_t{2} << 30) << "stage " << s;
  }
}

TEST(SimTest, ABadCostEntryFailsAtItsPlanLocation) {
  const std::string plan = WriteFile("sim_bad.pbtxt", UniformPlan());
  // The override replaces the plan's layer_costs list, so the bad entry is entry 0.
  const testing::ProcessResult run = RunJob(
      16, plan,
      {"--override", "runtime { sim { layer_costs { layer: 'fc99' forward_us: -3 } } }"});
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "runtime.sim.layer_costs[0].layer: 'fc99' is not a "
                                            "layer of model.layers"))
      << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "runtime.sim.layer_costs[0].forward_us: is -3"))
      << run.output;
  const testing::ProcessResult show = testing::RunProcess(
      {testing::BinPath("gpipe-plan"), "show", plan, "--override",
       "runtime { sim { profile: '/nonexistent/profile.json' } }"},
      60);
  EXPECT_NE(show.exit_code, 0) << show.output;
  EXPECT_TRUE(absl::StrContains(show.output, "runtime.sim.profile"))
      << show.output;
}

TEST(SimTest, PlanToolTimesTheScheduleInMilliseconds) {
  // 4 stages of one linear each, every layer 100us forward, 150us + 50us backward, an
  // instant link: GPipe's step is (M + K - 1) x (F + B) = 11 x 300us.
  std::string layers;
  std::string costs;
  for (int i = 0; i < 4; ++i) {
    absl::StrAppend(&layers, "  layers { name: 'fc", i, "' linear { out_features: 8 } }\n");
    absl::StrAppend(&costs, "    layer_costs { layer: 'fc", i,
                    "' forward_us: 100 backward_input_us: 150 backward_weight_us: 50 }\n");
  }
  const std::string plan = WriteFile("sim_show.pbtxt", absl::StrCat(R"pb(
name: "sim-show"
model {
  input { shape: [8] }
)pb",
                                                                     layers, R"pb(
  loss { softmax_cross_entropy {} }
}
pipeline { stages: 4 micro_batches: 8 schedule: GPIPE }
training { global_batch: 16 steps: 1 optimizer { sgd { lr: 0.1 } } }
data { synthetic { num_samples: 64 } }
runtime {
  device: SIM
  sim {
    link_latency_us: 0
    link_gbps: 1e12
)pb",
                                                                     costs, "  }\n}\n"));
  const testing::ProcessResult show =
      testing::RunProcess({testing::BinPath("gpipe-plan"), "show", plan}, 60);
  ASSERT_EQ(show.exit_code, 0) << show.output;
  EXPECT_TRUE(absl::StrContains(show.output, "time in ms on the simulated device"))
      << show.output;
  EXPECT_TRUE(absl::StrContains(show.output, "predicted step time 3.30 ms")) << show.output;
  // The same plan on the CPU is timed in relative units: 11 x (1 + 2) forwards.
  const testing::ProcessResult cpu = testing::RunProcess(
      {testing::BinPath("gpipe-plan"), "show", plan, "--override", "runtime { device: CPU }"}, 60);
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  EXPECT_TRUE(absl::StrContains(cpu.output, "predicted step time 33.00,")) << cpu.output;
}

}  // namespace
}  // namespace gpipe

// Measured activation memory per schedule and re-materialization policy against the paper's
// bounds and against PredictActivationMemory (what `gpipe-plan show` prints). K=4 stages,
// M=16 micro-batches of 4 samples; stage 0 runs fc1 -> gelu -> dropout, whose saved tensors
// (gelu's input, dropout's mask) are the "internal activations" of one micro-batch.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "layers/registry.h"
#include "runtime/estimate/activation_memory.h"
#include "runtime/plan/plan_analysis.h"
#include "runtime/plan/plan_loader.h"
#include "runtime/schedule/build_program.h"
#include "tests/exec/pipeline_harness.h"

namespace gpipe {
namespace {

constexpr int kStages = 4;
constexpr int kMicroBatches = 16;
constexpr int kMicroBatchSize = 4;

// The same four parts whatever the schedule: [fc1 act1 drop1] [fc2 norm2] [act2] [fc3], on 4
// stages, or on 2 stages x 2 chunks when interleaved (looped) or V-shaped.
bool Chunked(const std::string& schedule) {
  return schedule == "INTERLEAVED_1F1B" || schedule == "ZERO_BUBBLE_V" || schedule == "DUALPIPE_V";
}
int StagesOf(const std::string& schedule) { return Chunked(schedule) ? 2 : kStages; }

std::vector<std::string> Overrides(const std::string& schedule, const std::string& remat,
                                   const std::string& precision) {
  return {absl::StrCat("pipeline { micro_batches: ", kMicroBatches,
                       " boundaries: ['fc2', 'act2', 'fc3'] schedule: ", schedule,
                       " remat: ", remat, " virtual_stages: ", Chunked(schedule) ? 2 : 1, " }"),
          absl::StrCat("training { global_batch: ", kMicroBatches * kMicroBatchSize,
                       " steps: 2 precision: ", precision, " }"),
          "data { synthetic { num_samples: 128 } }"};
}

struct Prediction {
  std::vector<StageActivationMemory> stages;
  PartBytes stage0;
};

Prediction Predict(const std::string& schedule, const std::string& remat,
                   const std::string& precision = "FP32", const std::string& extra = "") {
  std::vector<std::string> overrides = Overrides(schedule, remat, precision);
  if (!extra.empty()) overrides.push_back(extra);
  overrides.push_back(absl::StrCat("pipeline { stages: ", StagesOf(schedule), " }"));
  auto loaded = ParsePlanText(testing::kPlan, "memory-test.pbtxt", ".", overrides);
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  const LayerRegistry registry = LayerRegistry::WithBuiltins();
  auto analyzed = AnalyzePlan(*loaded, registry);
  EXPECT_TRUE(analyzed.ok()) << analyzed.status();
  const pb::Pipeline& pipeline = analyzed->plan.pipeline();
  auto program = schedule::BuildProgram(pipeline.schedule(), pipeline.stages(), kMicroBatches,
                                        pipeline.virtual_stages());
  EXPECT_TRUE(program.ok()) << program.status();
  auto parts = MeasurePartBytes(*analyzed, registry, kMicroBatchSize);
  EXPECT_TRUE(parts.ok()) << parts.status();
  return {PredictActivationMemory(*program, *parts, pipeline.remat(), pipeline.offload(),
                                  /*recv_lookahead=*/2),
          parts->front()};
}

struct Measured {
  int64_t boundary;
  int64_t activation;
  int64_t boundary_grad;
};

// Per stage.
std::vector<Measured> RunStages(const std::string& schedule, const std::string& remat,
                                const std::string& precision = "FP32") {
  const testing::PipelineRun run = testing::RunPipeline(
      {.stages = StagesOf(schedule), .overrides = Overrides(schedule, remat, precision)});
  testing::ExpectSucceeded(run);
  std::vector<Measured> out;
  for (size_t s = 0; s < run.peak_boundary.size(); ++s) {
    out.push_back({run.peak_boundary[s], run.peak_activation[s], run.peak_boundary_grad[s]});
  }
  return out;
}

Measured RunStage0(const std::string& schedule, const std::string& remat) {
  return RunStages(schedule, remat).front();
}

TEST(MemoryTest, PeaksFollowTheScheduleAndMatchThePrediction) {
  struct Case {
    std::string schedule, remat, precision;
  };
  std::vector<Case> cases;
  // BF16: activations, boundary tensors and input gradients are stored as bf16 (half the bytes).
  for (const char* precision : {"FP32", "BF16"}) {
    for (const char* schedule : {"GPIPE", "ONE_F_ONE_B", "INTERLEAVED_1F1B", "ZERO_BUBBLE_H1",
                                 "ZERO_BUBBLE_H2", "ZERO_BUBBLE_V", "DUALPIPE_V"}) {
      for (const char* remat : {"NEVER", "EXCEPT_LAST", "ALWAYS"}) {
        cases.push_back({schedule, remat, precision});
      }
    }
  }
  std::printf(
      "K=%d (interleaved and V: 2 x 2 chunks), M=%d micro-batches of %d samples; bytes "
      "measured/predicted\n",
      kStages, kMicroBatches, kMicroBatchSize);
  std::printf("%-17s %-12s %-5s %5s %15s %15s %15s\n", "schedule", "remat", "prec", "stage",
              "boundary", "activation", "boundary_grad");
  for (const Case& c : cases) {
    SCOPED_TRACE(c.schedule + " " + c.remat + " " + c.precision);
    const Prediction predicted = Predict(c.schedule, c.remat, c.precision);
    const std::vector<Measured> measured = RunStages(c.schedule, c.remat, c.precision);
    ASSERT_EQ(measured.size(), predicted.stages.size());
    for (size_t s = 0; s < measured.size(); ++s) {
      SCOPED_TRACE(absl::StrCat("stage ", s));
      const StageActivationMemory& p = predicted.stages[s];
      const Measured& m = measured[s];
      std::printf("%-17s %-12s %-5s %5zu %7lld/%-7lld %7lld/%-7lld %7lld/%-7lld\n",
                  c.schedule.c_str(), c.remat.c_str(), c.precision.c_str(), s,
                  static_cast<long long>(m.boundary), static_cast<long long>(p.boundary),
                  static_cast<long long>(m.activation), static_cast<long long>(p.activation),
                  static_cast<long long>(m.boundary_grad), static_cast<long long>(p.boundary_grad));
      // Boundary and boundary-gradient tensors are whole micro-batches: exact.
      EXPECT_EQ(m.boundary, p.boundary);
      EXPECT_EQ(m.boundary_grad, p.boundary_grad);
      // Activations: the prediction holds at instruction boundaries; inside one layer a
      // measured peak may add that layer's temporaries (at most two [4, 16] f32 tensors).
      const int64_t layer_tensor = kMicroBatchSize * 16 * 4;
      EXPECT_GE(m.activation, p.activation);
      EXPECT_LE(m.activation, p.activation + 2 * layer_tensor);
    }
  }
}

// pipeline.offload STAGE_INPUTS: the stage inputs of re-materialized micro-batches wait in the
// CPU device's host arena. The device's boundary peak is the predicted one (exact), so is the
// arena's peak and the bytes moved per step; the other kinds do not change; and the weights after
// two steps are the same bits as without offload.
TEST(MemoryTest, OffloadedStageInputsLeaveTheDeviceAsPredictedAndChangeNoBit) {
  struct Case {
    std::string schedule, remat, precision;
  };
  std::vector<Case> cases;
  for (const char* schedule : {"GPIPE", "ONE_F_ONE_B", "INTERLEAVED_1F1B", "ZERO_BUBBLE_H1",
                               "ZERO_BUBBLE_V", "DUALPIPE_V"}) {
    for (const char* remat : {"ALWAYS", "EXCEPT_LAST"}) cases.push_back({schedule, remat, "FP32"});
  }
  cases.push_back({"GPIPE", "ALWAYS", "BF16"});
  cases.push_back({"ONE_F_ONE_B", "ALWAYS", "BF16"});
  const std::string offload = "pipeline { offload: STAGE_INPUTS }";
  std::printf("%-17s %-12s %-5s %5s %21s %15s %13s\n", "schedule", "remat", "prec", "stage",
              "boundary kept/offload", "host peak", "moved/step");
  for (const Case& c : cases) {
    SCOPED_TRACE(c.schedule + " " + c.remat + " " + c.precision);
    const Prediction predicted = Predict(c.schedule, c.remat, c.precision, offload);
    const Prediction kept = Predict(c.schedule, c.remat, c.precision);
    std::vector<std::string> overrides = Overrides(c.schedule, c.remat, c.precision);
    const testing::PipelineRun baseline =
        testing::RunPipeline({.stages = StagesOf(c.schedule), .overrides = overrides});
    testing::ExpectSucceeded(baseline);
    overrides.push_back(offload);
    const testing::PipelineRun run =
        testing::RunPipeline({.stages = StagesOf(c.schedule), .overrides = overrides});
    testing::ExpectSucceeded(run);
    EXPECT_EQ(run.weights, baseline.weights) << "offload changed the arithmetic";
    ASSERT_EQ(run.last_reports.size(), predicted.stages.size());
    int64_t moved = 0;
    for (const pb::StepReport& report : run.last_reports) {
      const int s = report.stage();
      SCOPED_TRACE(absl::StrCat("stage ", s));
      const StageActivationMemory& p = predicted.stages[s];
      std::printf("%-17s %-12s %-5s %5d %10lld/%-10lld %7lld/%-7lld %13lld\n", c.schedule.c_str(),
                  c.remat.c_str(), c.precision.c_str(), s,
                  static_cast<long long>(baseline.peak_boundary[s]),
                  static_cast<long long>(run.peak_boundary[s]),
                  static_cast<long long>(report.peak_offload_bytes()),
                  static_cast<long long>(p.host), static_cast<long long>(report.offloaded_bytes()));
      EXPECT_EQ(run.peak_boundary[s], p.boundary);
      EXPECT_EQ(report.peak_offload_bytes(), p.host);
      EXPECT_EQ(report.offloaded_bytes(), p.offloaded);
      EXPECT_LE(run.peak_boundary[s], baseline.peak_boundary[s]);
      EXPECT_EQ(run.peak_boundary_grad[s], baseline.peak_boundary_grad[s]);
      EXPECT_EQ(run.peak_activation[s], baseline.peak_activation[s]);
      EXPECT_EQ(kept.stages[s].host, 0);
      moved += report.offloaded_bytes();
    }
    EXPECT_GT(moved, 0) << "nothing was offloaded";
    // GPipe's first stage holds every micro-batch's input at its peak: offload leaves the one
    // in use, the one coming back and the receive buffers posted ahead (none on stage 0).
    if (c.schedule == "GPIPE") {
      const int64_t input = predicted.stage0.input;
      EXPECT_EQ(baseline.peak_boundary[0], kMicroBatches * input);
      EXPECT_LE(run.peak_boundary[0], 3 * input);
    }
  }
}

// Views and composites: flatten's output is its input's storage, a dropout of p = 0 passes its
// input through, and a residual's inner layers save each tensor once. Stage 0 is [conv, relu,
// flatten] (relu saves its output, which flatten passes on as the stage output); stage 1 is
// [fc, residual(linear, relu, dropout p=0, linear), head].
TEST(MemoryTest, ViewsAndCompositesMatchThePrediction) {
  const std::string model =
      "model { input { shape: [2, 4, 4] } "
      "layers { name: 'conv' conv2d { out_channels: 3 kernel_size: 3 padding: 1 } } "
      "layers { name: 'act' relu {} } "
      "layers { name: 'flat' flatten {} } "
      "layers { name: 'fc' linear { out_features: 8 } } "
      "layers { name: 'block' residual { layers { name: 'a' linear { out_features: 8 } } "
      "  layers { name: 'r' relu {} } layers { name: 'd' dropout { p: 0 } } "
      "  layers { name: 'b' linear { out_features: 8 } } } } "
      "layers { name: 'head' linear { out_features: 4 } } }";
  for (const char* schedule : {"GPIPE", "ONE_F_ONE_B", "ZERO_BUBBLE_H1"}) {
    for (const char* remat : {"NEVER", "EXCEPT_LAST"}) {
      SCOPED_TRACE(absl::StrCat(schedule, " ", remat));
      const std::vector<std::string> overrides = {
          model,
          absl::StrCat("pipeline { micro_batches: 4 boundaries: ['fc'] schedule: ", schedule,
                       " remat: ", remat, " }"),
          "training { global_batch: 16 steps: 2 }", "data { synthetic { num_samples: 64 } }"};
      std::vector<std::string> with_stages = overrides;
      with_stages.push_back("pipeline { stages: 2 }");
      auto loaded = ParsePlanText(testing::kPlan, "memory-test.pbtxt", ".", with_stages);
      ASSERT_TRUE(loaded.ok()) << loaded.status();
      const LayerRegistry registry = LayerRegistry::WithBuiltins();
      auto analyzed = AnalyzePlan(*loaded, registry);
      ASSERT_TRUE(analyzed.ok()) << analyzed.status();
      const pb::Pipeline& pipeline = analyzed->plan.pipeline();
      auto program = schedule::BuildProgram(pipeline.schedule(), 2, 4, 1);
      ASSERT_TRUE(program.ok()) << program.status();
      auto parts = MeasurePartBytes(*analyzed, registry, /*micro_batch_size=*/4);
      ASSERT_TRUE(parts.ok()) << parts.status();
      // Stage 0 saves conv's input (the stage input), relu's output (= the stage output: not
      // counted) and nothing for flatten.
      EXPECT_TRUE(parts->front().output_saved);
      EXPECT_EQ(parts->front().saved, 0);
      const std::vector<StageActivationMemory> predicted =
          PredictActivationMemory(*program, *parts, pipeline.remat(), pipeline.offload(),
                                  /*recv_lookahead=*/2);
      const testing::PipelineRun run = testing::RunPipeline({.stages = 2, .overrides = overrides});
      testing::ExpectSucceeded(run);
      for (size_t s = 0; s < predicted.size(); ++s) {
        SCOPED_TRACE(absl::StrCat("stage ", s));
        EXPECT_EQ(run.peak_boundary[s], predicted[s].boundary);
        EXPECT_EQ(run.peak_boundary_grad[s], predicted[s].boundary_grad);
        // Inside a layer the measured peak may add that layer's temporaries (a [4, 48] tensor).
        EXPECT_GE(run.peak_activation[s], predicted[s].activation);
        EXPECT_LE(run.peak_activation[s], predicted[s].activation + 2 * 4 * 48 * 4);
      }
    }
  }
}

// Composites under bf16 storage: a transformer block keeps its inner layers' outputs and
// attention's qkv and O as bf16 (norm statistics and the log-sum-exp f32), and the prediction
// follows. [fc, h0] on stage 0, [h1, flat, head] on stage 1, T = 4, D = 16, in FP32 and BF16.
TEST(MemoryTest, TransformerBlocksMatchThePredictionInBothPrecisions) {
  constexpr int64_t kT = 4, kD = 16, kBatch = 4;
  const std::string model =
      "model { input { shape: [4, 16] } "
      "layers { name: 'fc' linear { out_features: 16 } } "
      "layers { name: 'h0' transformer_block { num_heads: 2 } } "
      "layers { name: 'h1' transformer_block { num_heads: 2 } } "
      "layers { name: 'flat' flatten {} } "
      "layers { name: 'head' linear { out_features: 4 } } }";
  int64_t fp32_activation[2] = {0, 0};
  for (const char* precision : {"FP32", "BF16"}) {
    for (const char* schedule : {"GPIPE", "ONE_F_ONE_B"}) {
      for (const char* remat : {"NEVER", "EXCEPT_LAST"}) {
        SCOPED_TRACE(absl::StrCat(precision, " ", schedule, " ", remat));
        const std::vector<std::string> overrides = {
            model,
            absl::StrCat("pipeline { micro_batches: 4 boundaries: ['h1'] schedule: ", schedule,
                         " remat: ", remat, " }"),
            absl::StrCat("training { global_batch: 16 steps: 2 precision: ", precision, " }"),
            "data { synthetic { num_samples: 64 } }"};
        std::vector<std::string> with_stages = overrides;
        with_stages.push_back("pipeline { stages: 2 }");
        auto loaded = ParsePlanText(testing::kPlan, "memory-test.pbtxt", ".", with_stages);
        ASSERT_TRUE(loaded.ok()) << loaded.status();
        const LayerRegistry registry = LayerRegistry::WithBuiltins();
        auto analyzed = AnalyzePlan(*loaded, registry);
        ASSERT_TRUE(analyzed.ok()) << analyzed.status();
        const pb::Pipeline& pipeline = analyzed->plan.pipeline();
        auto program = schedule::BuildProgram(pipeline.schedule(), 2, 4, 1);
        ASSERT_TRUE(program.ok()) << program.status();
        auto parts = MeasurePartBytes(*analyzed, registry, kBatch);
        ASSERT_TRUE(parts.ok()) << parts.status();
        const std::vector<StageActivationMemory> predicted =
            PredictActivationMemory(*program, *parts, pipeline.remat(), pipeline.offload(),
                                    /*recv_lookahead=*/2);
        const testing::PipelineRun run =
            testing::RunPipeline({.stages = 2, .overrides = overrides});
        testing::ExpectSucceeded(run);
        for (size_t s = 0; s < predicted.size(); ++s) {
          SCOPED_TRACE(absl::StrCat("stage ", s));
          std::printf("%s %-11s %-11s stage %zu activation measured/predicted %lld/%lld\n",
                      precision, schedule, remat, s, static_cast<long long>(run.peak_activation[s]),
                      static_cast<long long>(predicted[s].activation));
          EXPECT_EQ(run.peak_boundary[s], predicted[s].boundary);
          EXPECT_EQ(run.peak_boundary_grad[s], predicted[s].boundary_grad);
          // Inside one block the measured peak may add the block's temporaries, as in FP32
          // (measured: under 2 of its mlp's [4, 4, 64] f32 hidden tensors; bound: 3).
          EXPECT_GE(run.peak_activation[s], predicted[s].activation);
          EXPECT_LE(run.peak_activation[s], predicted[s].activation + 3 * kBatch * kT * 4 * kD * 4);
          if (std::string(schedule) == "GPIPE" && std::string(remat) == "NEVER") {
            if (std::string(precision) == "FP32") {
              fp32_activation[s] = predicted[s].activation;
            } else {
              // Everything a block saves but its statistics is bf16: close to half.
              EXPECT_LE(predicted[s].activation, fp32_activation[s] * 55 / 100);
            }
          }
        }
      }
    }
  }
}

TEST(MemoryTest, StageZeroHoldsWhatThePapersSay) {
  // The paper's claims, on measured bytes. One micro-batch on stage 0: its input `a` (boundary)
  // and its internal activations `A` (saved tensors plus the output until it is sent).
  const Prediction reference = Predict("GPIPE", "NEVER");
  const int64_t a = reference.stage0.input;
  const int64_t A = reference.stage0.saved + reference.stage0.output;
  ASSERT_GT(A, 0);
  const Measured gpipe = RunStage0("GPIPE", "NEVER");
  const Measured one_f_one_b = RunStage0("ONE_F_ONE_B", "NEVER");
  const Measured gpipe_always = RunStage0("GPIPE", "ALWAYS");
  // GPipe holds all M micro-batches' activations; 1F1B at most K of them.
  EXPECT_GE(gpipe.activation, kMicroBatches * reference.stage0.saved);
  EXPECT_LE(one_f_one_b.activation, kStages * A);
  EXPECT_EQ(gpipe.boundary, kMicroBatches * a);
  EXPECT_EQ(one_f_one_b.boundary, kStages * a);
  // Remat ALWAYS: M boundary inputs plus one micro-batch's internals (O(N + L/K * N/M)).
  EXPECT_EQ(gpipe_always.boundary, kMicroBatches * a);
  EXPECT_LE(gpipe_always.activation, A + 2 * kMicroBatchSize * 16 * 4);
}

}  // namespace
}  // namespace gpipe

// Plan analysis on valid plans: shapes, parameters, FLOPs, partition, defaults, data paths,
// world size, the stage table.
#include "runtime/plan/plan_analysis.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "layers/linear.h"
#include "layers/registry.h"
#include "runtime/plan/plan_loader.h"

namespace gpipe {
namespace {

using ::testing::HasSubstr;

const std::string kTestdata = GPIPE_PLAN_TESTDATA;
const std::string kMlp = kTestdata + "/mlp.pbtxt";

absl::StatusOr<AnalyzedPlan> AnalyzeFile(const std::string& path,
                                         const std::vector<std::string>& overrides = {}) {
  auto loaded = LoadPlanFile(path, overrides);
  if (!loaded.ok()) return loaded.status();
  return AnalyzePlan(*loaded, LayerRegistry::WithBuiltins());
}

absl::StatusOr<AnalyzedPlan> AnalyzeText(const std::string& text, const LayerRegistry& registry) {
  auto loaded = ParsePlanText(text, "p.pbtxt", kTestdata, {});
  if (!loaded.ok()) return loaded.status();
  return AnalyzePlan(*loaded, registry);
}

std::vector<int> Starts(const AnalyzedPlan& plan) {
  std::vector<int> starts;
  for (const StageInfo& stage : plan.stages) starts.push_back(stage.first_layer);
  return starts;
}

TEST(PlanAnalysisTest, InfersShapesParametersAndFlopsOfEachLayer) {
  auto plan = AnalyzeFile(kMlp);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->layers.size(), 3u);
  const LayerInfo& fc1 = plan->layers[0];
  EXPECT_EQ(fc1.name, "fc1");
  EXPECT_EQ(fc1.kind, "linear");
  EXPECT_EQ(fc1.input_shape, (Shape{784}));
  EXPECT_EQ(fc1.output_shape, (Shape{128}));
  EXPECT_EQ(fc1.parameters, 784 * 128 + 128);
  EXPECT_EQ(fc1.flops_per_sample, 3.0 * 2 * 784 * 128);
  const LayerInfo& act1 = plan->layers[1];
  EXPECT_EQ(act1.kind, "relu");
  EXPECT_EQ(act1.output_shape, (Shape{128}));
  EXPECT_EQ(act1.parameters, 0);
  EXPECT_EQ(act1.flops_per_sample, 3.0 * 128);  // relu: one operation per element
  const LayerInfo& fc2 = plan->layers[2];
  EXPECT_EQ(fc2.input_shape, (Shape{128}));
  EXPECT_EQ(fc2.output_shape, (Shape{10}));
  EXPECT_EQ(fc2.parameters, 128 * 10 + 10);
  EXPECT_EQ(fc2.flops_per_sample, 3.0 * 2 * 128 * 10);
  EXPECT_EQ(plan->target_shape, Shape{});
  EXPECT_EQ(plan->target_dtype, DType::kI64);
  EXPECT_EQ(plan->num_classes, 10);
}

// Layer names may hold dots, so a plan's parameters can carry a Hugging Face checkpoint's names
// (model.embed_tokens.weight, lm_head.weight) and tie across them.
TEST(PlanAnalysisTest, DottedLayerNamesGiveHuggingFaceParameterNames) {
  absl::StatusOr<AnalyzedPlan> plan =
      AnalyzeText(R"pb(
                    model {
                      input {
                        shape: [ 8 ]
                        type: INT64
                      }
                      layers {
                        name: "model.embed_tokens"
                        embedding { num_embeddings: 256 embedding_dim: 4 }
                      }
                      layers {
                        name: "model.norm"
                        layer_norm {}
                      }
                      layers {
                        name: "lm_head"
                        linear { out_features: 256 bias: false }
                      }
                      loss { softmax_cross_entropy {} }
                      ties { parameters: [ "model.embed_tokens.weight", "lm_head.weight" ] }
                    }
                    pipeline { stages: 2 micro_batches: 2 }
                    training {
                      global_batch: 4
                      steps: 1
                      optimizer { sgd { lr: 0.1 } }
                    }
                    data { text { paths: "mlp.pbtxt" } }
                  )pb",
                  LayerRegistry::WithBuiltins());
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->layers.size(), 3u);
  EXPECT_EQ(plan->layers[0].parameter_names, std::vector<std::string>{"model.embed_tokens.weight"});
  EXPECT_EQ(plan->layers[1].parameter_names,
            (std::vector<std::string>{"model.norm.weight", "model.norm.bias"}));
  EXPECT_EQ(plan->layers[2].parameter_names, std::vector<std::string>{"lm_head.weight"});
  ASSERT_EQ(plan->ties.size(), 1u);
  EXPECT_EQ(plan->ties[0].members[1].name, "lm_head.weight");
  EXPECT_EQ(plan->ties[0].members[1].layer, 2);
}

TEST(PlanAnalysisTest, StagesSumTheirLayersAndChainShapes) {
  auto plan = AnalyzeFile(kMlp);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->stages.size(), 2u);
  // Balanced on parameters [100480, 0, 1290]: both cuts give 100480; the later cut wins the tie.
  const StageInfo& first = plan->stages[0];
  EXPECT_EQ(first.stage, 0);
  EXPECT_EQ(first.first_layer, 0);
  EXPECT_EQ(first.end_layer, 2);
  EXPECT_EQ(first.input_shape, (Shape{784}));
  EXPECT_EQ(first.output_shape, (Shape{128}));
  EXPECT_EQ(first.parameters, 100480);
  EXPECT_EQ(first.flops_per_sample, 602112.0 + 384.0);
  const StageInfo& second = plan->stages[1];
  EXPECT_EQ(second.stage, 1);
  EXPECT_EQ(second.first_layer, 2);
  EXPECT_EQ(second.end_layer, 3);
  EXPECT_EQ(second.input_shape, (Shape{128}));
  EXPECT_EQ(second.output_shape, (Shape{10}));
  EXPECT_EQ(second.parameters, 1290);
  EXPECT_EQ(second.flops_per_sample, 7680.0);
}

TEST(PlanAnalysisTest, MultiDimensionalInputsCountEveryRow) {
  auto plan = AnalyzeText(R"(
model {
  input { shape: [4, 6] }
  layers { name: "fc1" linear { out_features: 5 } }
  layers { name: "fc2" linear { out_features: 3 bias: false } }
  loss { mse {} }
}
training { global_batch: 2 steps: 1 optimizer { sgd { lr: 0.1 } } }
data { synthetic {} }
)",
                          LayerRegistry::WithBuiltins());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->layers[0].output_shape, (Shape{4, 5}));
  EXPECT_EQ(plan->layers[0].parameters, 35);
  EXPECT_EQ(plan->layers[0].flops_per_sample, 3.0 * 2 * 4 * 6 * 5);
  EXPECT_EQ(plan->layers[1].output_shape, (Shape{4, 3}));
  EXPECT_EQ(plan->layers[1].parameters, 15);
  EXPECT_EQ(plan->layers[1].flops_per_sample, 3.0 * 2 * 4 * 5 * 3);
  EXPECT_EQ(plan->target_shape, (Shape{4, 3}));
  EXPECT_EQ(plan->target_dtype, DType::kF32);
  EXPECT_EQ(plan->num_classes, 0);
  ASSERT_EQ(plan->stages.size(), 1u);
  EXPECT_EQ(plan->stages[0].parameters, 50);
}

TEST(PlanAnalysisTest, FlopsBalanceCutsWhereParameterBalanceDoesNot) {
  // FLOPs [602112, 384, 7680]: {fc1 | act1, fc2} has the smaller largest stage.
  auto plan = AnalyzeFile(kMlp, {"pipeline { balance: FLOPS }"});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Starts(*plan), (std::vector<int>{0, 1}));
  EXPECT_EQ(plan->stages[1].flops_per_sample, 384.0 + 7680.0);
}

TEST(PlanAnalysisTest, ExplicitBoundariesOverrideTheBalancer) {
  auto plan = AnalyzeFile(kMlp, {"pipeline { boundaries: \"act1\" }"});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Starts(*plan), (std::vector<int>{0, 1}));
  EXPECT_EQ(plan->stages[1].input_shape, (Shape{128}));
  EXPECT_EQ(plan->stages[1].parameters, 1290);
  auto three = AnalyzeFile(kMlp, {"pipeline { stages: 3 boundaries: [\"act1\", \"fc2\"] }"});
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_EQ(Starts(*three), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(three->stages[2].end_layer, 3);
}

TEST(PlanAnalysisTest, ZeroCostLayersAreStillAssigned) {
  auto plan = AnalyzeText(R"(
model {
  input { shape: [4] }
  layers { name: "fc" linear { out_features: 4 } }
  layers { name: "a1" relu {} }
  layers { name: "a2" tanh {} }
  layers { name: "a3" gelu {} }
  loss { mse {} }
}
pipeline { stages: 3 }
training { global_batch: 2 steps: 1 optimizer { sgd { lr: 0.1 } } }
data { synthetic {} }
)",
                          LayerRegistry::WithBuiltins());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Starts(*plan), (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(plan->stages[2].end_layer, 4);
  EXPECT_EQ(plan->stages[1].parameters, 0);
}

TEST(PlanAnalysisTest, DefaultsAreMadeExplicitAndUnsetOptionalsStayUnset) {
  auto loaded = LoadPlanFile(kMlp, {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto plan = AnalyzePlan(*loaded, LayerRegistry::WithBuiltins());
  ASSERT_TRUE(plan.ok()) << plan.status();
  const pb::Plan& p = plan->plan;
  EXPECT_TRUE(p.pipeline().has_schedule());
  EXPECT_EQ(p.pipeline().schedule(), pb::GPIPE);
  EXPECT_TRUE(p.pipeline().has_remat());
  EXPECT_EQ(p.pipeline().remat(), pb::EXCEPT_LAST);
  EXPECT_TRUE(p.pipeline().has_balance());
  EXPECT_TRUE(p.training().has_seed());
  const pb::Sgd& sgd = p.training().optimizer().sgd();
  EXPECT_TRUE(sgd.has_dampening());
  EXPECT_TRUE(sgd.has_nesterov());
  EXPECT_TRUE(sgd.has_weight_decay());
  EXPECT_EQ(sgd.momentum(), 0.9);  // written in the file, kept
  EXPECT_TRUE(p.model().layers(0).linear().has_bias());
  EXPECT_TRUE(p.model().layers(0).linear().bias());
  EXPECT_TRUE(p.data().has_shuffle());
  EXPECT_TRUE(p.data().synthetic().has_num_samples());
  EXPECT_EQ(p.data().synthetic().num_samples(), 4096);
  EXPECT_EQ(p.data().synthetic().noise(), 0.5);
  ASSERT_TRUE(p.has_runtime());
  EXPECT_TRUE(p.runtime().has_device());
  EXPECT_TRUE(p.runtime().has_transport());
  EXPECT_EQ(p.runtime().threads(), 1);
  EXPECT_TRUE(p.runtime().has_log_every());
  EXPECT_TRUE(p.runtime().timeouts().has_wait_seconds());
  EXPECT_EQ(p.runtime().timeouts().wait_seconds(), 300);
  EXPECT_EQ(p.runtime().timeouts().startup_seconds(), 120);
  EXPECT_FALSE(p.runtime().has_metrics_out());     // unset means "no metrics file"
  EXPECT_FALSE(p.model().layers(1).has_linear());  // the oneof keeps its member
  // The loaded plan is not modified.
  EXPECT_FALSE(loaded->plan.pipeline().has_schedule());
  EXPECT_FALSE(loaded->plan.has_runtime());
}

TEST(PlanAnalysisTest, OptimizerAndLayerDefaultsAreMadeExplicit) {
  auto plan = AnalyzeText(R"(
model {
  input { shape: [4] }
  layers { name: "ln" layer_norm {} }
  layers { name: "drop" dropout {} }
  layers { name: "fc" linear { out_features: 2 } }
  loss { softmax_cross_entropy {} }
}
training { global_batch: 2 steps: 1 optimizer { adamw {} } }
data { synthetic {} }
)",
                          LayerRegistry::WithBuiltins());
  ASSERT_TRUE(plan.ok()) << plan.status();
  const pb::AdamW& adamw = plan->plan.training().optimizer().adamw();
  EXPECT_TRUE(adamw.has_lr());
  EXPECT_EQ(adamw.lr(), 0.001);
  EXPECT_TRUE(adamw.has_weight_decay());
  EXPECT_EQ(adamw.weight_decay(), 0.01);
  EXPECT_TRUE(adamw.has_eps());
  EXPECT_TRUE(plan->plan.model().layers(0).layer_norm().has_eps());
  EXPECT_TRUE(plan->plan.model().layers(0).layer_norm().has_elementwise_affine());
  EXPECT_TRUE(plan->plan.model().layers(1).dropout().has_p());
  EXPECT_EQ(plan->plan.model().layers(1).dropout().p(), 0.5);
  EXPECT_EQ(plan->layers[0].parameters, 8);  // layer_norm weight and bias over [4]
}

TEST(PlanAnalysisTest, RelativeDataPathsResolveAgainstThePlanDirectory) {
  auto plan = AnalyzeFile(kTestdata + "/npy_plan/plan.pbtxt");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->plan.data().npy().inputs(), kTestdata + "/npy_plan/data/inputs.npy");
  EXPECT_EQ(plan->plan.data().npy().targets(), kTestdata + "/npy_plan/data/targets.npy");
}

TEST(PlanAnalysisTest, AbsoluteDataPathsAreKept) {
  const std::string inputs = kTestdata + "/npy_plan/data/inputs.npy";
  auto plan = AnalyzeFile(kTestdata + "/npy_plan/plan.pbtxt",
                          {"data { npy { inputs: \"" + inputs + "\" } }"});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->plan.data().npy().inputs(), inputs);
}

TEST(PlanAnalysisTest, HeldOutAndIdxPathsResolveAgainstThePlanDirectory) {
  const std::string dir = kTestdata + "/npy_plan";
  auto npy = AnalyzeFile(dir + "/plan.pbtxt",
                         {"data { npy { eval_inputs: \"data/inputs.npy\" eval_targets: "
                          "\"./data/targets.npy\" } }"});
  ASSERT_TRUE(npy.ok()) << npy.status();
  EXPECT_EQ(npy->plan.data().npy().eval_inputs(), dir + "/data/inputs.npy");
  EXPECT_EQ(npy->plan.data().npy().eval_targets(), dir + "/data/targets.npy");
  auto idx = AnalyzeFile(dir + "/plan.pbtxt",
                         {"data { idx { train_images: \"data/inputs.npy\" train_labels: "
                          "\"data/targets.npy\" test_images: \"./data/inputs.npy\" "
                          "test_labels: \"" +
                          dir + "/data/targets.npy\" } }"});
  ASSERT_TRUE(idx.ok()) << idx.status();
  const pb::Idx& files = idx->plan.data().idx();
  EXPECT_EQ(files.train_images(), dir + "/data/inputs.npy");
  EXPECT_EQ(files.train_labels(), dir + "/data/targets.npy");
  EXPECT_EQ(files.test_images(), dir + "/data/inputs.npy");
  EXPECT_EQ(files.test_labels(), dir + "/data/targets.npy");
}

TEST(PlanAnalysisTest, TextPathsResolveAgainstThePlanDirectory) {
  auto plan = AnalyzeText(R"(
model {
  input { shape: [8] type: INT64 }
  layers { name: "embed" embedding { num_embeddings: 256 embedding_dim: 4 } }
  layers { name: "head" linear { out_features: 256 } }
  loss { softmax_cross_entropy {} }
}
training { global_batch: 2 steps: 1 optimizer { adam {} } }
data { text { paths: ["mlp.pbtxt", "npy_plan/../syntax_error.pbtxt"] } }
)",
                          LayerRegistry::WithBuiltins());
  ASSERT_TRUE(plan.ok()) << plan.status();
  const pb::Text& text = plan->plan.data().text();
  ASSERT_EQ(text.paths_size(), 2);
  EXPECT_EQ(text.paths(0), kTestdata + "/mlp.pbtxt");
  EXPECT_EQ(text.paths(1), kTestdata + "/syntax_error.pbtxt");
  EXPECT_TRUE(text.has_eval_fraction());
  EXPECT_EQ(text.eval_fraction(), 0.1);
}

TEST(PlanAnalysisTest, LayerFactoryErrorsNameTheLayerAndItsInputShape) {
  LayerRegistry registry;
  ASSERT_TRUE(registry.Register("linear", &Linear::Create).ok());
  ASSERT_TRUE(registry
                  .Register("relu",
                            [](const pb::Layer&,
                               const Shape& input) -> absl::StatusOr<std::unique_ptr<Layer>> {
                              return absl::InvalidArgumentError(absl::StrCat(
                                  "this relu takes rank-1 inputs, got ", input.ToString()));
                            })
                  .ok());
  auto plan = AnalyzeText(R"(model {
  input { shape: [2, 4] }
  layers { name: "fc" linear { out_features: 8 } }
  layers { name: "act" relu {} }
  loss { mse {} }
}
training { global_batch: 2 steps: 1 optimizer { sgd { lr: 0.1 } } }
data { synthetic {} }
)",
                          registry);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message(),
            "p.pbtxt:4:3: model.layers[1]: layer 'act' (relu, input [2, 8]): this relu takes "
            "rank-1 inputs, got [2, 8]");
}

TEST(PlanAnalysisTest, FactoryReturningNoLayerIsReportedNotDereferenced) {
  LayerRegistry registry;
  ASSERT_TRUE(
      registry
          .Register("linear",
                    [](const pb::Layer&, const Shape&) -> absl::StatusOr<std::unique_ptr<Layer>> {
                      return std::unique_ptr<Layer>();
                    })
          .ok());
  auto plan = AnalyzeText(R"(model {
  input { shape: [4] }
  layers { name: "fc" linear { out_features: 2 } }
  loss { mse {} }
}
training { global_batch: 2 steps: 1 optimizer { sgd { lr: 0.1 } } }
data { synthetic {} }
)",
                          registry);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message(),
            "p.pbtxt:3:3: model.layers[0]: layer 'fc' (linear, input [4]): its registered "
            "factory returned no layer; fix the factory to return a layer or an error");
}

TEST(PlanAnalysisTest, UnregisteredLayerKindIsReportedAtTheLayer) {
  auto plan = AnalyzeText(R"(model {
  input { shape: [4] }
  layers { name: "fc" linear { out_features: 2 } }
  loss { mse {} }
}
training { global_batch: 2 steps: 1 optimizer { sgd { lr: 0.1 } } }
data { synthetic {} }
)",
                          LayerRegistry());
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message(),
            "p.pbtxt:3:3: model.layers[0]: layer 'fc' (linear, input [4]): layer kind 'linear' "
            "is not registered");
}

TEST(CheckWorldSizeTest, MatchingWorldSizeIsAccepted) {
  auto loaded = LoadPlanFile(kMlp, {});
  ASSERT_TRUE(loaded.ok());
  auto plan = AnalyzePlan(*loaded, LayerRegistry::WithBuiltins());
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(CheckWorldSize(*plan, *loaded, 2).ok());
}

TEST(CheckWorldSizeTest, MismatchNamesTheFieldTheJobAndBothRemedies) {
  auto loaded = LoadPlanFile(kMlp, {});
  ASSERT_TRUE(loaded.ok());
  auto plan = AnalyzePlan(*loaded, LayerRegistry::WithBuiltins());
  ASSERT_TRUE(plan.ok());
  const absl::Status status = CheckWorldSize(*plan, *loaded, 3);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "the plan needs 2 processes (pipeline.stages at " + kMlp +
                                  ":11:3) but the job has 3; launch with -n 2 or set "
                                  "pipeline.stages: 3");
  // More processes than layers, a multiple of the stages: replicas would use them.
  EXPECT_EQ(CheckWorldSize(*plan, *loaded, 8).message(),
            "the plan needs 2 processes (pipeline.stages at " + kMlp +
                ":11:3) but the job has 8; launch with -n 2 or set pipeline.data_parallel: 4");
  // Not a multiple: only relaunching helps.
  EXPECT_EQ(CheckWorldSize(*plan, *loaded, 7).message(),
            "the plan needs 2 processes (pipeline.stages at " + kMlp +
                ":11:3) but the job has 7; launch with -n 2 (the model's 3 layers allow at most 3 "
                "stages)");
}

TEST(CheckWorldSizeTest, ReplicasMultiplyTheProcessCount) {
  auto loaded = LoadPlanFile(kMlp, {"pipeline { data_parallel: 2 }"});
  ASSERT_TRUE(loaded.ok());
  auto plan = AnalyzePlan(*loaded, LayerRegistry::WithBuiltins());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(CheckWorldSize(*plan, *loaded, 4).ok());
  EXPECT_EQ(CheckWorldSize(*plan, *loaded, 2).message(),
            "the plan needs 4 processes (2 stages x 2 replicas: pipeline.stages at " + kMlp +
                ":11:3; pipeline.data_parallel at --override[1]:1:12) but the job has 2; launch "
                "with -n 4 or set pipeline.data_parallel: 1");
  EXPECT_THAT(CheckWorldSize(*plan, *loaded, 5).message(),
              HasSubstr("but the job has 5; launch with -n 4"));
}

TEST(CheckWorldSizeTest, OverriddenAndDefaultStageCountsAreExplained) {
  auto overridden = LoadPlanFile(kMlp, {"pipeline { stages: 3 }"});
  ASSERT_TRUE(overridden.ok());
  auto plan = AnalyzePlan(*overridden, LayerRegistry::WithBuiltins());
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(CheckWorldSize(*plan, *overridden, 2).message(),
              HasSubstr("(pipeline.stages at --override[1]:1:12) but the job has 2"));

  auto defaulted = LoadPlanFile(kTestdata + "/npy_plan/plan.pbtxt", {});
  ASSERT_TRUE(defaulted.ok());
  auto one = AnalyzePlan(*defaulted, LayerRegistry::WithBuiltins());
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(CheckWorldSize(*one, *defaulted, 2).message(),
            "the plan needs 1 process (pipeline.stages is not set in " + kTestdata +
                "/npy_plan/plan.pbtxt, so 1) but the job has 2; launch with -n 1 or set "
                "pipeline.data_parallel: 2");
}

TEST(StageSpecTest, ControlPlaneStagesCarryTheAnalysis) {
  auto plan = AnalyzeFile(kMlp);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::vector<pb::StageSpec> specs = ToStageSpecs(*plan);
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[1].stage(), 1);
  EXPECT_EQ(specs[1].first_layer(), 2);
  EXPECT_EQ(specs[1].end_layer(), 3);
  ASSERT_EQ(specs[1].input_shape_size(), 1);
  EXPECT_EQ(specs[1].input_shape(0), 128);
  EXPECT_EQ(specs[1].output_shape(0), 10);
  EXPECT_EQ(specs[1].parameters(), 1290);
  EXPECT_EQ(specs[1].flops(), 7680.0);
}

TEST(StageTableTest, ListsStagesAndLayersWithTheirNumbers) {
  auto plan = AnalyzeFile(kMlp);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(FormatStageTable(*plan),
            "plan 'mlp-test': 3 layers in 2 stages, 101,770 parameters, 610.2K FLOP/sample "
            "(forward+backward)\n"
            "input [784] -> output [10]; loss softmax_cross_entropy, target [] i64, 10 classes\n"
            "pipeline: 4 micro-batches of 16 samples, schedule GPIPE, remat EXCEPT_LAST, "
            "partition balanced on PARAMETERS\n"
            "\n"
            "stage  layers     parameters  share  FLOP/sample  share  input  output\n"
            "    0  fc1, act1     100,480  98.7%       602.5K  98.7%  [784]  [128]\n"
            "    1  fc2             1,290   1.3%         7.7K   1.3%  [128]  [10]\n"
            "\n"
            "layer  name  kind    stage  input  output  parameters  FLOP/sample\n"
            "    0  fc1   linear      0  [784]  [128]      100,480       602.1K\n"
            "    1  act1  relu        0  [128]  [128]            0          384\n"
            "    2  fc2   linear      1  [128]  [10]         1,290         7.7K\n");
}

TEST(StageTableTest, LongStagesAreAbbreviatedAndExplicitBoundariesNamed) {
  auto plan = AnalyzeText(R"(
model {
  input { shape: [4] }
  layers { name: "l0" linear { out_features: 4 } }
  layers { name: "l1" relu {} }
  layers { name: "l2" linear { out_features: 4 } }
  layers { name: "l3" relu {} }
  layers { name: "l4" linear { out_features: 4 } }
  layers { name: "l5" linear { out_features: 2 } }
  loss { softmax_cross_entropy {} }
}
pipeline { stages: 2 boundaries: "l5" }
training { global_batch: 2 steps: 1 optimizer { sgd { lr: 0.1 } } }
data { synthetic {} }
)",
                          LayerRegistry::WithBuiltins());
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::string table = FormatStageTable(*plan);
  EXPECT_THAT(table, HasSubstr("partition from pipeline.boundaries\n"));
  EXPECT_THAT(table, HasSubstr("    0  l0 .. l4 (5 layers)  "));
  EXPECT_THAT(table, HasSubstr("    1  l5                   "));
}

TEST(StageTableTest, ProfileBalancedBoundariesAreNamedAsTheBalancersChoice) {
  // balance: PROFILE reaches the analysis with the boundaries the balancer chose.
  auto plan = AnalyzeText(R"(
model {
  input { shape: [4] }
  layers { name: "l0" linear { out_features: 4 } }
  layers { name: "l1" linear { out_features: 2 } }
  loss { softmax_cross_entropy {} }
}
pipeline { stages: 2 boundaries: "l1" balance: PROFILE }
training { global_batch: 2 steps: 1 optimizer { sgd { lr: 0.1 } } }
data { synthetic {} }
)",
                          LayerRegistry::WithBuiltins());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(FormatStageTable(*plan),
              HasSubstr("partition balanced on PROFILE (the least predicted step time)\n"));
}

}  // namespace
}  // namespace gpipe

namespace gpipe {
namespace {

TEST(PlanAnalysisTest, InterleavingCutsStagesTimesChunksPartsMappedRoundRobin) {
  // The three-layer MLP has too few layers for 2 x 2 parts; repeat its hidden layer.
  const std::string text = R"pb(
    model {
      input { shape: [ 8 ] }
      layers { name: "a" linear { out_features: 8 } }
      layers { name: "b" linear { out_features: 8 } }
      layers { name: "c" linear { out_features: 8 } }
      layers { name: "d" linear { out_features: 3 } }
      loss { softmax_cross_entropy {} }
    }
    pipeline {
      stages: 2
      micro_batches: 2
      schedule: INTERLEAVED_1F1B
      virtual_stages: 2
    }
    training { global_batch: 4 steps: 1 optimizer { sgd { lr: 0.1 } } }
    data { synthetic {} }
  )pb";
  auto plan = AnalyzeText(text, LayerRegistry::WithBuiltins());
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->stages.size(), 4u);
  EXPECT_EQ(Starts(*plan), (std::vector<int>{0, 1, 2, 3}));
  // Part j runs on stage j % 2 as chunk j / 2.
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(plan->stages[j].part, j);
    EXPECT_EQ(plan->stages[j].stage, j % 2);
    EXPECT_EQ(plan->stages[j].chunk, j / 2);
  }
  const std::vector<pb::StageSpec> specs = ToStageSpecs(*plan);
  ASSERT_EQ(specs.size(), 4u);
  EXPECT_EQ(specs[3].stage(), 3);
  EXPECT_EQ(specs[3].first_layer(), 3);
  EXPECT_THAT(FormatStageTable(*plan), HasSubstr("stage.chunk"));
}

TEST(PlanAnalysisTest, VShapePutsTheFirstAndLastPartOnStageZero) {
  const std::string text = R"pb(
    model {
      input { shape: [ 8 ] }
      layers {
        name: "a"
        linear { out_features: 8 }
      }
      layers {
        name: "b"
        linear { out_features: 8 }
      }
      layers {
        name: "c"
        linear { out_features: 8 }
      }
      layers {
        name: "d"
        linear { out_features: 3 }
      }
      loss { softmax_cross_entropy {} }
    }
    pipeline { stages: 2 micro_batches: 2 schedule: ZERO_BUBBLE_V }
    training {
      global_batch: 4
      steps: 1
      optimizer { sgd { lr: 0.1 } }
    }
    data { synthetic {} }
  )pb";
  auto plan = AnalyzeText(text, LayerRegistry::WithBuiltins());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->plan.pipeline().virtual_stages(), 2);
  EXPECT_EQ(plan->plan.pipeline().placement(), pb::V_SHAPE);
  ASSERT_EQ(plan->stages.size(), 4u);
  // Parts 0, 1, 2, 3 on stages 0, 1, 1, 0 as chunks 0, 0, 1, 1.
  const int stage_of[] = {0, 1, 1, 0};
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(plan->stages[j].stage, stage_of[j]) << "part " << j;
    EXPECT_EQ(plan->stages[j].chunk, j / 2) << "part " << j;
  }
  EXPECT_THAT(FormatStageTable(*plan), HasSubstr("1.1  c"));
}

}  // namespace
}  // namespace gpipe

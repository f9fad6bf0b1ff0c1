// Loading plans: parsing, exact error positions, field locations, overrides.
#include "runtime/plan/plan_loader.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpipe {
namespace {

using ::testing::HasSubstr;

const std::string kTestdata = GPIPE_PLAN_TESTDATA;
const std::string kMlp = kTestdata + "/mlp.pbtxt";

std::string Where(const LoadedPlan& loaded, const std::string& field) {
  auto it = loaded.locations.find(field);
  return it == loaded.locations.end() ? "<none>" : it->second.ToString();
}

TEST(PlanLoaderTest, GoodPlanParsesWithPathAndDirectory) {
  auto loaded = LoadPlanFile(kMlp, {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->plan.name(), "mlp-test");
  ASSERT_EQ(loaded->plan.model().layers_size(), 3);
  EXPECT_EQ(loaded->plan.model().layers(2).linear().out_features(), 10);
  EXPECT_EQ(loaded->plan.pipeline().stages(), 2);
  EXPECT_EQ(loaded->plan.training().optimizer().sgd().momentum(), 0.9);
  EXPECT_EQ(loaded->path, kMlp);
  EXPECT_EQ(loaded->directory, kTestdata);
}

TEST(PlanLoaderTest, FieldLocationsAreOneBasedAndPointAtTheFieldName) {
  auto loaded = LoadPlanFile(kMlp, {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(Where(*loaded, "name"), kMlp + ":2:1");
  EXPECT_EQ(Where(*loaded, "model"), kMlp + ":3:1");
  EXPECT_EQ(Where(*loaded, "model.input.shape"), kMlp + ":4:11");
  EXPECT_EQ(Where(*loaded, "model.layers"), kMlp + ":5:3");
  EXPECT_EQ(Where(*loaded, "model.layers[2]"), kMlp + ":7:3");
  EXPECT_EQ(Where(*loaded, "model.layers[2].name"), kMlp + ":7:12");
  EXPECT_EQ(Where(*loaded, "model.layers[2].linear.out_features"), kMlp + ":7:33");
  EXPECT_EQ(Where(*loaded, "pipeline.stages"), kMlp + ":11:3");
  EXPECT_EQ(Where(*loaded, "training.optimizer.sgd.momentum"), kMlp + ":17:30");
  EXPECT_EQ(Where(*loaded, "pipeline.boundaries"), "<none>");
}

TEST(PlanLoaderTest, LocationOfFallsBackToTheNearestWrittenAncestorThenTheFile) {
  auto loaded = LoadPlanFile(kMlp, {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->LocationOf("pipeline.micro_batches"), kMlp + ":12:3");
  EXPECT_EQ(loaded->LocationOf("pipeline.boundaries[1]"), kMlp + ":10:1");
  EXPECT_EQ(loaded->LocationOf("model.layers[1].name"), kMlp + ":6:12");
  EXPECT_EQ(loaded->LocationOf("model.layers[1].relu.nothing"), kMlp + ":6:25");
  EXPECT_EQ(loaded->LocationOf("model.input.shape[0]"), kMlp + ":4:11");
  EXPECT_EQ(loaded->LocationOf("runtime.threads"), kMlp);
}

TEST(PlanLoaderTest, ListElementsShareTheirMentionsLocation) {
  // One mention as a list and one alone: protobuf records two locations for three elements, so
  // elements point at the field, never at another element's mention.
  auto loaded = ParsePlanText(
      "pipeline {\n  boundaries: [\"a\", \"b\"]\n  boundaries: \"c\"\n}\n", "p.pbtxt", ".", {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->LocationOf("pipeline.boundaries[1]"), "p.pbtxt:2:3");
  EXPECT_EQ(loaded->LocationOf("pipeline.boundaries[2]"), "p.pbtxt:2:3");
  // Every element its own mention: each has its own location.
  auto separate = ParsePlanText(
      "pipeline {\n  boundaries: \"a\"\n  boundaries: \"b\"\n}\n", "q.pbtxt", ".", {});
  ASSERT_TRUE(separate.ok()) << separate.status();
  EXPECT_EQ(separate->LocationOf("pipeline.boundaries[1]"), "q.pbtxt:3:3");
}

TEST(PlanLoaderTest, SyntaxErrorReportsExactLineAndColumn) {
  const std::string path = kTestdata + "/syntax_error.pbtxt";
  auto loaded = LoadPlanFile(path, {});
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(loaded.status().message(), path + ":3:23: Expected \",\", found \"}\".");
}

TEST(PlanLoaderTest, UnknownFieldIsRejectedAtTheFieldNameWithASuggestion) {
  auto loaded = ParsePlanText("name: \"x\"\npipeline {\n  stagez: 4\n}\n", "p.pbtxt", ".", {});
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(loaded.status().message(),
            "p.pbtxt:3:3: Message type \"gpipe.pb.Pipeline\" has no field named \"stagez\". "
            "Did you mean \"stages\"?");
}

TEST(PlanLoaderTest, UnknownFieldFarFromAnyNameListsTheFields) {
  auto loaded = ParsePlanText("runtime { xyzzy: 3 }", "p.pbtxt", ".", {});
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().message(),
            "p.pbtxt:1:11: Message type \"gpipe.pb.Runtime\" has no field named \"xyzzy\". "
            "Fields of Runtime: device, transport, log_every, metrics_out, threads, timeouts, "
            "memory_limit_bytes, trace, trace_steps, sim, cuda, gradient_bucket_bytes, "
            "peak_tflops.");
}

TEST(PlanLoaderTest, UnknownEnumValueIsRejectedAtTheValue) {
  auto by_name = ParsePlanText("pipeline {\n  schedule: FOO\n}\n", "p.pbtxt", ".", {});
  ASSERT_FALSE(by_name.ok());
  EXPECT_EQ(by_name.status().message(),
            "p.pbtxt:2:13: Unknown enumeration value of \"FOO\" for field \"schedule\". "
            "Use one of: GPIPE, ONE_F_ONE_B, INTERLEAVED_1F1B, ZERO_BUBBLE_H1, ZERO_BUBBLE_H2, "
            "EVAL, CUSTOM, ZERO_BUBBLE_V, DUALPIPE_V.");
  auto by_number = ParsePlanText("pipeline { remat: 7 }", "p.pbtxt", ".", {});
  ASSERT_FALSE(by_number.ok());
  EXPECT_EQ(by_number.status().message(),
            "p.pbtxt:1:19: Unknown enumeration value of \"7\" for field \"remat\". "
            "Use one of: NEVER, EXCEPT_LAST, ALWAYS.");
}

TEST(PlanLoaderTest, FieldGivenTwiceIsRejectedAtItsSecondOccurrence) {
  auto loaded = ParsePlanText("pipeline { stages: 4 stages: 5 }", "p.pbtxt", ".", {});
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().message(),
            "p.pbtxt:1:22: Non-repeated field \"stages\" is specified multiple times.");
}

TEST(PlanLoaderTest, MissingFileIsNotFoundNamingThePath) {
  const std::string path = kTestdata + "/no_such_plan.pbtxt";
  auto loaded = LoadPlanFile(path, {});
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(loaded.status().message(), HasSubstr(path));
}

TEST(PlanLoaderTest, DirectoryInsteadOfAFileIsNotFound) {
  auto loaded = LoadPlanFile(kTestdata, {});
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(loaded.status().message(), HasSubstr("is a directory"));
}

TEST(PlanLoaderTest, FileWithoutDirectoryResolvesAgainstTheWorkingDirectory) {
  // Not read: only the directory derivation for a bare file name is checked.
  auto loaded = LoadPlanFile("no_such_plan_here.pbtxt", {});
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kNotFound);
}

TEST(PlanOverrideTest, SingularFieldsMergeAndPointIntoTheOverride) {
  auto loaded = LoadPlanFile(kMlp, {"pipeline { micro_batches: 8 }"});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->plan.pipeline().stages(), 2);
  EXPECT_EQ(loaded->plan.pipeline().micro_batches(), 8);
  EXPECT_EQ(Where(*loaded, "pipeline.micro_batches"), "--override[1]:1:12");
  EXPECT_EQ(Where(*loaded, "pipeline.stages"), kMlp + ":11:3");
  // The pipeline message was opened in the file first and keeps that location.
  EXPECT_EQ(Where(*loaded, "pipeline"), kMlp + ":10:1");
}

TEST(PlanOverrideTest, OverridesApplyInOrder) {
  auto loaded =
      LoadPlanFile(kMlp, {"pipeline { stages: 3 }", "name: \"renamed\" pipeline { stages: 1 }"});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->plan.pipeline().stages(), 1);
  EXPECT_EQ(loaded->plan.name(), "renamed");
  EXPECT_EQ(Where(*loaded, "pipeline.stages"), "--override[2]:1:28");
  EXPECT_EQ(Where(*loaded, "name"), "--override[2]:1:1");
}

TEST(PlanOverrideTest, RepeatedFieldsAreReplacedNotAppended) {
  auto loaded = LoadPlanFile(
      kMlp, {"model { input { shape: [28, 28] } layers { name: \"only\" linear { out_features: 10 "
             "} } }"});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const pb::Model& model = loaded->plan.model();
  ASSERT_EQ(model.input().shape_size(), 2);
  EXPECT_EQ(model.input().shape(0), 28);
  ASSERT_EQ(model.layers_size(), 1);
  EXPECT_EQ(model.layers(0).name(), "only");
  EXPECT_TRUE(model.has_loss());  // untouched parts stay
  EXPECT_EQ(Where(*loaded, "model.layers[0]"), "--override[1]:1:35");
  EXPECT_EQ(Where(*loaded, "model.layers[0].linear.out_features"), "--override[1]:1:66");
  EXPECT_EQ(Where(*loaded, "model.input.shape"), "--override[1]:1:17");
  EXPECT_EQ(Where(*loaded, "model.layers[1]"), "<none>");
  EXPECT_EQ(Where(*loaded, "model.layers[2].linear.out_features"), "<none>");
}

TEST(PlanOverrideTest, EmptyListClearsARepeatedField) {
  auto loaded = ParsePlanText("pipeline { stages: 3 boundaries: [\"b\", \"c\"] }", "p.pbtxt", ".",
                              {"pipeline { stages: 2 boundaries: [] }"});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->plan.pipeline().boundaries_size(), 0);
  EXPECT_EQ(loaded->plan.pipeline().stages(), 2);
  EXPECT_EQ(Where(*loaded, "pipeline.boundaries"), "--override[1]:1:22");
  EXPECT_EQ(Where(*loaded, "pipeline.boundaries[0]"), "<none>");
}

TEST(PlanOverrideTest, ChoosingAnotherOneofMemberDropsTheOldOne) {
  auto loaded = LoadPlanFile(kMlp, {"training { optimizer { adam { lr: 0.01 } } }"});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const pb::Optimizer& optimizer = loaded->plan.training().optimizer();
  EXPECT_TRUE(optimizer.has_adam());
  EXPECT_FALSE(optimizer.has_sgd());
  EXPECT_EQ(optimizer.adam().lr(), 0.01);
  EXPECT_EQ(loaded->plan.training().global_batch(), 64);
  EXPECT_EQ(Where(*loaded, "training.optimizer.sgd.momentum"), "<none>");
  EXPECT_EQ(Where(*loaded, "training.optimizer.adam.lr"), "--override[1]:1:31");
}

TEST(PlanOverrideTest, ErrorsInAnOverrideNameTheOverride) {
  auto loaded = LoadPlanFile(kMlp, {"pipeline { stages: 2 }", "pipeline { stages: }"});
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(loaded.status().message(), "--override[2]:1:20: Expected integer, got: }");
  auto unknown = LoadPlanFile(kMlp, {"pipeline { stage: 2 }"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(),
              HasSubstr("--override[1]:1:12: Message type \"gpipe.pb.Pipeline\" has no field "
                        "named \"stage\". Did you mean \"stages\"?"));
}

}  // namespace
}  // namespace gpipe

#include "runtime/plan/plan_diff.h"

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace gpipe {
namespace {

using ::testing::ElementsAre;
using ::testing::FieldsAre;

pb::Plan Parse(const std::string& text) {
  pb::Plan plan;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &plan)) << text;
  return plan;
}

TEST(PlanDiffTest, SamePlansHaveNoDifferences) {
  const pb::Plan plan = Parse("pipeline { stages: 2 } training { steps: 5 }");
  EXPECT_TRUE(DiffPlans(plan, plan).empty());
}

TEST(PlanDiffTest, EveryChangedFieldIsOneLineWithBothValues) {
  const pb::Plan before = Parse(
      "pipeline { stages: 4 schedule: GPIPE } training { steps: 5 optimizer { sgd { lr: 0.1 } } }"
      " model { layers { name: \"a\" } layers { name: \"b\" } }");
  const pb::Plan now = Parse(
      "pipeline { stages: 2 schedule: ONE_F_ONE_B } training { steps: 9 optimizer { sgd { lr: "
      "0.05 } } } model { layers { name: \"a\" } layers { name: \"c\" } } name: \"x\"");
  EXPECT_THAT(DiffPlans(before, now),
              ElementsAre(FieldsAre("name", "\"x\"", "(unset)"),
                          FieldsAre("model.layers[1].name", "\"c\"", "\"b\""),
                          FieldsAre("pipeline.stages", "2", "4"),
                          FieldsAre("pipeline.schedule", "ONE_F_ONE_B", "GPIPE"),
                          FieldsAre("training.steps", "9", "5"),
                          FieldsAre("training.optimizer.sgd.lr", "0.05", "0.1")));
}

TEST(PlanDiffTest, RepeatedFieldOfOtherLengthIsOneDifference) {
  EXPECT_THAT(DiffPlans(Parse("model { layers { name: \"a\" } }"),
                        Parse("model { layers { name: \"a\" } layers { name: \"b\" } }")),
              ElementsAre(FieldsAre("model.layers", "2 entries", "1 entries")));
}

}  // namespace
}  // namespace gpipe

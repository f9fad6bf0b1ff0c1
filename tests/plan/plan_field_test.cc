// gpipe-plan field's lookup: one value of a plan by its dotted name, after the overrides.
#include "runtime/plan/plan_field.h"

#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace gpipe {
namespace {

pb::Plan Parse(const std::string& text) {
  pb::Plan plan;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &plan)) << text;
  return plan;
}

TEST(PlanFieldValueTest, GivesScalarsAsText) {
  const pb::Plan plan = Parse(
      R"pb(checkpoint { dir: "ckpt dir/x" every_steps: 5 }
           runtime {
             device: SIM
             timeouts { wait_seconds: 2.5 }
             cuda { allow_tf32: true }
           })pb");
  EXPECT_EQ(*PlanFieldValue(plan, "checkpoint.dir"), "ckpt dir/x");
  EXPECT_EQ(*PlanFieldValue(plan, "checkpoint.every_steps"), "5");
  EXPECT_EQ(*PlanFieldValue(plan, "runtime.device"), "SIM");
  EXPECT_EQ(*PlanFieldValue(plan, "runtime.timeouts.wait_seconds"), "2.5");
  EXPECT_EQ(*PlanFieldValue(plan, "runtime.cuda.allow_tf32"), "true");
}

TEST(PlanFieldValueTest, UnsetFieldsGiveTheirDefaults) {
  const pb::Plan plan = Parse("");
  EXPECT_EQ(*PlanFieldValue(plan, "checkpoint.dir"), "");
  EXPECT_EQ(*PlanFieldValue(plan, "runtime.timeouts.startup_seconds"), "120");
  EXPECT_EQ(*PlanFieldValue(plan, "runtime.device"), "CPU");
}

TEST(PlanFieldValueTest, NamesWhatIsNotASingleValue) {
  const pb::Plan plan = Parse("");
  EXPECT_EQ(PlanFieldValue(plan, "checkpoint.directory").status().message(),
            "'checkpoint.directory' is not a field of the plan (gpipe.pb.Checkpoint has no field "
            "'directory'; see proto/plan-reference.md)");
  EXPECT_EQ(PlanFieldValue(plan, "checkpoint").status().message(),
            "'checkpoint' is a message; name one of its fields");
  EXPECT_EQ(PlanFieldValue(plan, "model.layers.name").status().message(),
            "'model.layers' is a list; name a single value");
  EXPECT_EQ(PlanFieldValue(plan, "checkpoint.dir.x").status().message(),
            "'checkpoint.dir' is a value, not a message with fields");
}

}  // namespace
}  // namespace gpipe

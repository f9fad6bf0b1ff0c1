// Typed field getters: absent fields, wrong types and out-of-range integers come back as
// INVALID_ARGUMENT naming the field, never as an exception.
#include "runtime/core/json_fields.h"

#include <string>

#include "gtest/gtest.h"

namespace gpipe {
namespace {

Json Sample() {
  absl::StatusOr<Json> value = ParseJson(
      R"({"name": "fc1", "count": 7, "ratio": 0.5, "whole": 2.0, "on": true,
          "huge": 18446744073709551615, "list": [1, 2]})",
      "sample");
  EXPECT_TRUE(value.ok()) << value.status();
  return value.ok() ? *value : Json();
}

void ExpectInvalid(const absl::Status& status, const std::string& message) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), message);
}

TEST(JsonFieldsTest, ReadsFieldsOfTheirType) {
  const Json json = Sample();
  EXPECT_EQ(*GetJsonString(json, "name"), "fc1");
  EXPECT_EQ(*GetJsonInt64(json, "count"), 7);
  EXPECT_EQ(*GetJsonDouble(json, "ratio"), 0.5);
  EXPECT_EQ(*GetJsonDouble(json, "count"), 7.0);  // integers are numbers too
  EXPECT_TRUE(*GetJsonBool(json, "on"));
  EXPECT_TRUE((*GetJsonField(json, "list"))->is_array());
}

TEST(JsonFieldsTest, MissingFieldsAndWrongTypesNameTheField) {
  const Json json = Sample();
  ExpectInvalid(GetJsonString(json, "absent").status(), "field \"absent\": key 'absent' not found");
  ExpectInvalid(GetJsonString(json, "count").status(),
                "field \"count\": type must be string, but is number");
  ExpectInvalid(GetJsonDouble(json, "name").status(),
                "field \"name\": type must be number, but is string");
  ExpectInvalid(GetJsonBool(json, "list").status(),
                "field \"list\": type must be boolean, but is array");
  ExpectInvalid(GetJsonInt64(json, "ratio").status(),
                "field \"ratio\": type must be an integer within int64, but is the number 0.5");
  ExpectInvalid(GetJsonInt64(json, "whole").status(),
                "field \"whole\": type must be an integer within int64, but is the number 2.0");
  ExpectInvalid(GetJsonInt64(json, "huge").status(),
                "field \"huge\": type must be an integer within int64, but is the number "
                "18446744073709551615");
  ExpectInvalid(GetJsonInt64(json, "name").status(),
                "field \"name\": type must be an integer within int64, but is string");
}

TEST(JsonFieldsTest, FieldsOfANonObjectAreAnErrorNotACrash) {
  const Json array = Json::array({1, 2});
  ExpectInvalid(GetJsonString(array, "name").status(),
                "field \"name\": cannot use at() with array");
  EXPECT_EQ(JsonFind(array, "name"), nullptr);
  EXPECT_EQ(JsonFind(nullptr, "name"), nullptr);
  EXPECT_FALSE(JsonAsInt64(Json("7")).has_value());
}

TEST(JsonCallTest, TurnsNlohmannExceptionsIntoStatus) {
  absl::StatusOr<int> ok = JsonCall("reading", [] { return 3; });
  EXPECT_EQ(*ok, 3);
  absl::StatusOr<int> thrown = JsonCall("reading x", [] { return Json("s").get<int>(); });
  ExpectInvalid(thrown.status(), "reading x: type must be number, but is string");
}

}  // namespace
}  // namespace gpipe

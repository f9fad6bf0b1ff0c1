// The strict JSON parser: values, escapes, and every kind of rejection.
#include "runtime/ckpt/json_parser.h"

#include <string>

#include "gtest/gtest.h"

namespace gpipe {
namespace {

void ExpectRejected(const std::string& text, const std::string& fragment) {
  absl::StatusOr<JsonValue> value = ParseJson(text);
  ASSERT_FALSE(value.ok()) << "accepted: " << text;
  EXPECT_EQ(value.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(value.status().message().find(fragment), std::string::npos)
      << text << " -> " << value.status();
}

TEST(JsonParserTest, ParsesNestedObjectsInTextOrder) {
  absl::StatusOr<JsonValue> value =
      ParseJson(" {\"b\": [1, -2.5e1, true, null], \"a\": {\"x\": \"y\"}, \"c\": false}\n");
  ASSERT_TRUE(value.ok()) << value.status();
  ASSERT_TRUE(value->is_object());
  EXPECT_EQ(value->keys(), (std::vector<std::string>{"b", "a", "c"}));
  const JsonValue* b = value->Find("b");
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(b->is_array());
  ASSERT_EQ(b->items().size(), 4u);
  EXPECT_EQ(b->items()[0].AsInt64(), 1);
  EXPECT_EQ(b->items()[1].number_value(), -25.0);
  EXPECT_EQ(b->items()[1].number_literal(), "-2.5e1");
  EXPECT_FALSE(b->items()[1].AsInt64().has_value());
  EXPECT_TRUE(b->items()[2].bool_value());
  EXPECT_TRUE(b->items()[3].is_null());
  EXPECT_EQ(value->Find("a")->Find("x")->string_value(), "y");
  EXPECT_FALSE(value->Find("c")->bool_value());
  EXPECT_EQ(value->Find("missing"), nullptr);
}

TEST(JsonParserTest, IntegersStayExactBeyondDoublePrecision) {
  absl::StatusOr<JsonValue> value = ParseJson(
      "[9007199254740993, -9223372036854775808, "
      "9223372036854775808]");
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(value->items()[0].AsInt64(), 9007199254740993LL);
  EXPECT_EQ(value->items()[1].AsInt64(), INT64_MIN);
  EXPECT_FALSE(value->items()[2].AsInt64().has_value());  // past int64
}

TEST(JsonParserTest, DecodesEscapesAndUtf8) {
  absl::StatusOr<JsonValue> value =
      ParseJson(R"(["a\"b\\c\/d\b\f\n\r\t", "\u00e9\u20ac\ud83d\ude00", "é€😀"])");
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(value->items()[0].string_value(), "a\"b\\c/d\b\f\n\r\t");
  EXPECT_EQ(value->items()[1].string_value(), "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
  EXPECT_EQ(value->items()[2].string_value(), value->items()[1].string_value());
}

TEST(JsonParserTest, ScalarsAtTopLevel) {
  EXPECT_EQ(ParseJson("0")->AsInt64(), 0);
  EXPECT_EQ(ParseJson("\"s\"")->string_value(), "s");
  EXPECT_TRUE(ParseJson(" null ")->is_null());
  EXPECT_EQ(ParseJson("-0.5E-2")->number_value(), -0.005);
}

TEST(JsonParserTest, RejectsNonJsonWithTheOffset) {
  ExpectRejected("", "invalid JSON at byte 0: unexpected end of text");
  ExpectRejected("hello", "invalid JSON at byte 0: unexpected character 'h'");
  ExpectRejected("{\"a\": 1,}", "at byte 8: expected a string key");
  ExpectRejected("[1, 2,]", "at byte 6: unexpected character ']'");
  ExpectRejected("{\"a\" 1}", "expected ':' after an object key");
  ExpectRejected("{\"a\": 1 \"b\": 2}", "expected ',' or '}'");
  ExpectRejected("[1 2]", "expected ',' or ']'");
  ExpectRejected("{'a': 1}", "expected a string key");
  ExpectRejected("[01]", "leading zeros");
  ExpectRejected("[1.]", "expected a digit after '.'");
  ExpectRejected("[1e]", "expected a digit in the exponent");
  ExpectRejected("[-]", "expected a digit");
  ExpectRejected("[+1]", "unexpected character '+'");
  ExpectRejected("[NaN]", "unexpected character 'N'");
  ExpectRejected("[1e999]", "number 1e999 is out of range");
  ExpectRejected("[tru]", "expected 'true'");
  ExpectRejected("\"abc", "unterminated string");
  ExpectRejected("\"a\tb\"", "control character in a string");
  ExpectRejected("\"\\x\"", "invalid escape");
  ExpectRejected("\"\\u12G4\"", "expected 4 hex digits");
  ExpectRejected("\"\\ud83d\"", "unpaired high surrogate");
  ExpectRejected("\"\\ude00\"", "unpaired low surrogate");
  ExpectRejected("\"\xC3\"", "invalid UTF-8");
  ExpectRejected("\"\xED\xA0\x80\"", "invalid UTF-8");
  ExpectRejected("{} {}", "at byte 3: unexpected text after the JSON value");
  ExpectRejected("{}x", "unexpected text after the JSON value");
  ExpectRejected(std::string("{}\0", 3), "unexpected text after the JSON value");
}

TEST(JsonParserTest, RejectsDuplicateKeysAtTheSecondKey) {
  ExpectRejected("{\"w\": 1, \"v\": 2, \"w\": 3}", "at byte 17: duplicate object key \"w\"");
  // Same key in different objects is fine.
  EXPECT_TRUE(ParseJson("{\"a\": {\"w\": 1}, \"b\": {\"w\": 2}}").ok());
}

TEST(JsonParserTest, RejectsNestingBeyondTheLimit) {
  const std::string ok_depth(kMaxJsonDepth - 1, '[');
  EXPECT_TRUE(ParseJson(ok_depth + std::string(kMaxJsonDepth - 1, ']')).ok());
  const std::string deep(100000, '[');
  ExpectRejected(deep, "nesting deeper than 64 levels");
}

}  // namespace
}  // namespace gpipe

// JsonObject: escaping, numbers, lists, nesting, key order.
#include "runtime/train/json_writer.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gpipe {
namespace {

TEST(JsonQuoteTest, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(JsonQuote("plain"), "\"plain\"");
  EXPECT_EQ(JsonQuote("say \"hi\""), "\"say \\\"hi\\\"\"");
  EXPECT_EQ(JsonQuote("C:\\path"), "\"C:\\\\path\"");
  EXPECT_EQ(JsonQuote("a\nb\tc\rd\be\ff"), "\"a\\nb\\tc\\rd\\be\\ff\"");
  EXPECT_EQ(JsonQuote(std::string("nul\0x\x01\x1f", 7)), "\"nul\\u0000x\\u0001\\u001f\"");
  EXPECT_EQ(JsonQuote("slash / stays"), "\"slash / stays\"");
}

TEST(JsonQuoteTest, KeepsValidUtf8AndReplacesInvalidBytes) {
  EXPECT_EQ(JsonQuote("\xC3\xA9t\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"),
            "\"\xC3\xA9t\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\"");
  // A lone continuation byte, a truncated sequence, an overlong '/' and a surrogate.
  EXPECT_EQ(JsonQuote("a\x80z"), "\"a\xEF\xBF\xBDz\"");
  EXPECT_EQ(JsonQuote("\xE2\x82"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");
  EXPECT_EQ(JsonQuote("\xC0\xAF"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");
  EXPECT_EQ(JsonQuote("\xED\xA0\x80"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");
}

TEST(JsonNumberTest, WritesShortestRoundTripForm) {
  EXPECT_EQ(JsonNumber(0.1), "0.1");
  EXPECT_EQ(JsonNumber(3.0), "3.0");
  EXPECT_EQ(JsonNumber(-2.5), "-2.5");
  EXPECT_EQ(JsonNumber(0.0), "0.0");
  EXPECT_EQ(JsonNumber(1e300), "1e+300");
  EXPECT_EQ(JsonNumber(1.0 / 3.0), "0.3333333333333333");
  for (double value :
       {2.302585092994046, 1.0 / 7.0, 6.02214076e23, -1.5e-310, std::numeric_limits<double>::max(),
        std::numeric_limits<double>::denorm_min()}) {
    const std::string text = JsonNumber(value);
    EXPECT_EQ(std::strtod(text.c_str(), nullptr), value) << text;
    EXPECT_LE(text.size(), 24u) << text;
  }
}

TEST(JsonNumberTest, NonFiniteIsNull) {
  EXPECT_EQ(JsonNumber(std::numeric_limits<double>::quiet_NaN()), "null");
  EXPECT_EQ(JsonNumber(std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(JsonNumber(-std::numeric_limits<double>::infinity()), "null");
}

TEST(JsonObjectTest, WritesFieldsInInsertionOrder) {
  JsonObject object;
  EXPECT_TRUE(object.empty());
  EXPECT_EQ(object.ToString(), "{}");
  object.AddInt("step", 3)
      .AddDouble("loss", 0.25)
      .AddString("phase", "train")
      .AddBool("skipped", false)
      .AddNull("accuracy")
      .AddInt("big", std::numeric_limits<int64_t>::min());
  EXPECT_FALSE(object.empty());
  EXPECT_EQ(object.ToString(),
            "{\"step\":3,\"loss\":0.25,\"phase\":\"train\",\"skipped\":false,\"accuracy\":null,"
            "\"big\":-9223372036854775808}");
}

TEST(JsonObjectTest, WritesListsAndNestedObjects) {
  JsonObject stage;
  stage.AddInt("stage", 1).AddDoubleList("ms", std::vector<double>{1.5, std::nan(""), 2.0});
  JsonObject object;
  object.AddIntList("peak_bytes", std::vector<int64_t>{10, -2, 0})
      .AddStringList("names", std::vector<std::string>{"fc1", "a\"b"})
      .AddDoubleList("empty", std::vector<double>{})
      .AddObject("stage1", stage);
  EXPECT_EQ(object.ToString(),
            "{\"peak_bytes\":[10,-2,0],\"names\":[\"fc1\",\"a\\\"b\"],\"empty\":[],"
            "\"stage1\":{\"stage\":1,\"ms\":[1.5,null,2.0]}}");
}

TEST(JsonObjectTest, AddingAKeyAgainReplacesItsValueInPlace) {
  JsonObject object;
  object.AddInt("a", 1).AddInt("b", 2).AddString("a", "x");
  EXPECT_EQ(object.ToString(), "{\"a\":\"x\",\"b\":2}");
}

TEST(JsonObjectTest, EscapesKeys) {
  JsonObject object;
  object.AddInt("line\nbreak \"q\"", 1);
  EXPECT_EQ(object.ToString(), "{\"line\\nbreak \\\"q\\\"\":1}");
}

}  // namespace
}  // namespace gpipe

// ParseJson (strict: every kind of rejected input, with where it goes wrong), DumpJson (key
// order, shortest round-trip doubles, null for non-finite) and JsonQuote (escaping, UTF-8).
#include "runtime/core/json.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/core/json_fields.h"

namespace gpipe {
namespace {

void ExpectRejected(const std::string& text, const std::string& fragment) {
  absl::StatusOr<Json> value = ParseJson(text, "the input");
  ASSERT_FALSE(value.ok()) << "accepted: " << text;
  EXPECT_EQ(value.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(value.status().message().find("the input is not valid JSON"), std::string::npos)
      << value.status();
  EXPECT_NE(value.status().message().find(fragment), std::string::npos)
      << text << " -> " << value.status();
}

std::vector<std::string> Keys(const Json& object) {
  std::vector<std::string> keys;
  for (const auto& [key, unused] : object.items()) keys.push_back(key);
  return keys;
}

TEST(ParseJsonTest, ParsesNestedObjectsInTextOrder) {
  absl::StatusOr<Json> value =
      ParseJson(" {\"b\": [1, -2.5e1, true, null], \"a\": {\"x\": \"y\"}, \"c\": false}\n", "test");
  ASSERT_TRUE(value.ok()) << value.status();
  ASSERT_TRUE(value->is_object());
  EXPECT_EQ(Keys(*value), (std::vector<std::string>{"b", "a", "c"}));
  const Json* b = JsonFind(*value, "b");
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(b->is_array());
  ASSERT_EQ(b->size(), 4u);
  EXPECT_EQ(JsonAsInt64((*b)[0]), 1);
  EXPECT_EQ((*b)[1].get<double>(), -25.0);
  EXPECT_FALSE(JsonAsInt64((*b)[1]).has_value());  // written with an exponent
  EXPECT_TRUE((*b)[2].get<bool>());
  EXPECT_TRUE((*b)[3].is_null());
  EXPECT_EQ(value->at("a").at("x").get<std::string>(), "y");
  EXPECT_FALSE(value->at("c").get<bool>());
  EXPECT_EQ(JsonFind(*value, "missing"), nullptr);
}

TEST(ParseJsonTest, IntegersStayExactBeyondDoublePrecision) {
  absl::StatusOr<Json> value =
      ParseJson("[9007199254740993, -9223372036854775808, 9223372036854775808, 1.0]", "test");
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(JsonAsInt64((*value)[0]), 9007199254740993LL);
  EXPECT_EQ(JsonAsInt64((*value)[1]), INT64_MIN);
  EXPECT_FALSE(JsonAsInt64((*value)[2]).has_value());  // past int64
  EXPECT_FALSE(JsonAsInt64((*value)[3]).has_value());  // written with a fraction
}

TEST(ParseJsonTest, DecodesEscapesAndUtf8) {
  absl::StatusOr<Json> value =
      ParseJson(R"(["a\"b\\c\/d\b\f\n\r\t", "\u00e9\u20ac\ud83d\ude00", "é€😀"])", "test");
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ((*value)[0].get<std::string>(), "a\"b\\c/d\b\f\n\r\t");
  EXPECT_EQ((*value)[1].get<std::string>(), "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
  EXPECT_EQ((*value)[2].get<std::string>(), (*value)[1].get<std::string>());
}

TEST(ParseJsonTest, ScalarsAtTopLevel) {
  EXPECT_EQ(JsonAsInt64(*ParseJson("0", "test")), 0);
  EXPECT_EQ(ParseJson("\"s\"", "test")->get<std::string>(), "s");
  EXPECT_TRUE(ParseJson(" null ", "test")->is_null());
  EXPECT_EQ(ParseJson("-0.5E-2", "test")->get<double>(), -0.005);
}

TEST(ParseJsonTest, RejectsNonJsonSayingWhere) {
  ExpectRejected("", "(line 1, column 1): syntax error while parsing value - unexpected end");
  ExpectRejected("hello", "(line 1, column 1): syntax error while parsing value - invalid literal");
  ExpectRejected("{\"a\": 1,}", "(line 1, column 9): syntax error while parsing object key");
  ExpectRejected("[1, 2,]",
                 "(line 1, column 7): syntax error while parsing value - unexpected ']'");
  ExpectRejected("{\"a\" 1}", "expected ':'");
  ExpectRejected("{\"a\": 1 \"b\": 2}", "expected '}'");
  ExpectRejected("[1 2]", "expected ']'");
  ExpectRejected("{'a': 1}", "invalid literal");
  ExpectRejected("[01]", "expected ']'");  // leading zeros end the number at 0
  ExpectRejected("[1.]", "expected digit after '.'");
  ExpectRejected("[1e]", "expected '+', '-', or digit after exponent");
  ExpectRejected("[-]", "expected digit after '-'");
  ExpectRejected("[+1]", "invalid literal");
  ExpectRejected("[NaN]", "invalid literal");
  ExpectRejected("[1e999]", "number overflow parsing '1e999'");
  ExpectRejected("[-1e999]", "number overflow");
  ExpectRejected("[tru]", "invalid literal");
  ExpectRejected("\"abc", "missing closing quote");
  ExpectRejected("\"a\tb\"", "control character U+0009 (HT) must be escaped");
  ExpectRejected("\"\\x\"", "forbidden character after backslash");
  ExpectRejected("\"\\u12G4\"", "'\\u' must be followed by 4 hex digits");
  ExpectRejected("\"\\ud83d\"", "surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF");
  ExpectRejected("\"\\ude00\"", "surrogate U+DC00..U+DFFF must follow U+D800..U+DBFF");
  ExpectRejected("\"\xC3\"", "ill-formed UTF-8 byte");
  ExpectRejected("\"\xED\xA0\x80\"", "ill-formed UTF-8 byte");  // an encoded surrogate
  ExpectRejected("{} {}",
                 "(line 1, column 4): syntax error while parsing value - unexpected '{'; "
                 "expected end of input");
  ExpectRejected("{}x", "expected end of input");
  ExpectRejected("{\n\"a\": 1,\n}", "(line 3, column 1)");
  ExpectRejected("[1, /* comment */ 2]", "invalid literal");
}

TEST(ParseJsonTest, RejectsNulBytesEvenWhereNlohmannWouldStop) {
  // nlohmann's lexer reads NUL as the end of the input; it must not cut a document short.
  ExpectRejected(std::string("{}\0", 3), "(byte 2): a NUL byte");
  ExpectRejected(std::string("{}\0\0\0\0\0\0", 8), "(byte 2): a NUL byte");
  ExpectRejected(std::string("[1,\0 2]", 7), "(byte 3): a NUL byte");
}

TEST(ParseJsonTest, RejectsDuplicateKeysNamingTheObject) {
  ExpectRejected("{\"w\": 1, \"v\": 2, \"w\": 3}", ": duplicate object key \"w\" in $");
  ExpectRejected("{\"layers\": [{}, {\"a\": 1, \"a\": 2}]}",
                 ": duplicate object key \"a\" in $.layers[1]");
  // Same key in different objects is fine.
  EXPECT_TRUE(ParseJson("{\"a\": {\"w\": 1}, \"b\": {\"w\": 2}}", "test").ok());
}

TEST(ParseJsonTest, RejectsNestingBeyondTheLimit) {
  const std::string ok_depth(kMaxJsonDepth, '[');
  EXPECT_TRUE(ParseJson(ok_depth + std::string(kMaxJsonDepth, ']'), "test").ok());
  ExpectRejected(std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']'),
                 ": nesting deeper than 64 levels");
  // Hostile input: far deeper than any stack would survive recursively.
  ExpectRejected(std::string(1'000'000, '['), ": nesting deeper than 64 levels");
  std::string objects;
  for (int i = 0; i < 100'000; ++i) objects += "{\"k\":";
  ExpectRejected(objects, ": nesting deeper than 64 levels at $.k.k");
}

TEST(ParseJsonTest, ManyKeysParseInLinearTime) {
  // ordered_json's own insertion searches every key; the builder appends checked keys.
  std::string text = "{";
  for (int i = 0; i < 200'000; ++i) absl::StrAppend(&text, i == 0 ? "" : ",", "\"k", i, "\":", i);
  text += "}";
  absl::StatusOr<Json> value = ParseJson(text, "test");
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(value->size(), 200'000u);
  EXPECT_EQ(value->at("k199999").get<int64_t>(), 199999);
}

TEST(DumpJsonTest, WritesFieldsInInsertionOrderOnOneLine) {
  Json object = Json::object();
  EXPECT_EQ(DumpJson(object), "{}");
  object["step"] = 3;
  object["loss"] = 0.25;
  object["phase"] = "train";
  object["skipped"] = false;
  object["accuracy"] = nullptr;
  object["big"] = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(DumpJson(object),
            "{\"step\":3,\"loss\":0.25,\"phase\":\"train\",\"skipped\":false,\"accuracy\":null,"
            "\"big\":-9223372036854775808}");
  object["step"] = "again";  // replaced in place
  EXPECT_EQ(DumpJson(object).substr(0, 17), "{\"step\":\"again\",\"");
}

TEST(DumpJsonTest, WritesListsAndNestedObjects) {
  const Json stage = {{"stage", 1}, {"ms", std::vector<double>{1.5, std::nan(""), 2.0}}};
  const Json object = {{"peak_bytes", std::vector<int64_t>{10, -2, 0}},
                       {"names", std::vector<std::string>{"fc1", "a\"b"}},
                       {"empty", std::vector<double>{}},
                       {"stage1", stage}};
  EXPECT_EQ(DumpJson(object),
            "{\"peak_bytes\":[10,-2,0],\"names\":[\"fc1\",\"a\\\"b\"],\"empty\":[],"
            "\"stage1\":{\"stage\":1,\"ms\":[1.5,null,2.0]}}");
}

TEST(DumpJsonTest, WritesDoublesInShortestRoundTripForm) {
  EXPECT_EQ(DumpJson(0.1), "0.1");
  EXPECT_EQ(DumpJson(3.0), "3.0");
  EXPECT_EQ(DumpJson(-2.5), "-2.5");
  EXPECT_EQ(DumpJson(0.0), "0.0");
  EXPECT_EQ(DumpJson(1e300), "1e+300");
  EXPECT_EQ(DumpJson(1.0 / 3.0), "0.3333333333333333");
  EXPECT_EQ(DumpJson(1e7), "10000000.0");
  EXPECT_EQ(DumpJson(2.5e-7), "2.5e-07");
  for (double value :
       {2.302585092994046, 1.0 / 7.0, 6.02214076e23, -1.5e-310, std::numeric_limits<double>::max(),
        std::numeric_limits<double>::denorm_min()}) {
    const std::string text = DumpJson(value);
    EXPECT_EQ(std::strtod(text.c_str(), nullptr), value) << text;
    EXPECT_LE(text.size(), 24u) << text;
  }
  EXPECT_EQ(DumpJson(std::numeric_limits<double>::quiet_NaN()), "null");
  EXPECT_EQ(DumpJson(std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(DumpJson(-std::numeric_limits<double>::infinity()), "null");
}

TEST(JsonQuoteTest, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(JsonQuote("plain"), "\"plain\"");
  EXPECT_EQ(JsonQuote("say \"hi\""), "\"say \\\"hi\\\"\"");
  EXPECT_EQ(JsonQuote("C:\\path"), "\"C:\\\\path\"");
  EXPECT_EQ(JsonQuote("a\nb\tc\rd\be\ff"), "\"a\\nb\\tc\\rd\\be\\ff\"");
  EXPECT_EQ(JsonQuote(std::string("nul\0x\x01\x1f", 7)), "\"nul\\u0000x\\u0001\\u001f\"");
  EXPECT_EQ(JsonQuote("slash / stays"), "\"slash / stays\"");
  const Json keyed = {{"line\nbreak \"q\"", 1}};
  EXPECT_EQ(DumpJson(keyed), "{\"line\\nbreak \\\"q\\\"\":1}");
}

TEST(JsonQuoteTest, KeepsValidUtf8AndReplacesInvalidBytes) {
  EXPECT_EQ(JsonQuote("\xC3\xA9t\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"),
            "\"\xC3\xA9t\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\"");
  // A lone continuation byte, a truncated sequence (one U+FFFD for the whole of it), an
  // overlong '/' and an encoded surrogate.
  EXPECT_EQ(JsonQuote("a\x80z"), "\"a\xEF\xBF\xBDz\"");
  EXPECT_EQ(JsonQuote("\xE2\x82"), "\"\xEF\xBF\xBD\"");
  EXPECT_EQ(JsonQuote("\xC0\xAF"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");
  EXPECT_EQ(JsonQuote("\xED\xA0\x80"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");
}

TEST(CheckUtf8Test, NamesTheBadByte) {
  EXPECT_TRUE(CheckUtf8("\xC3\xA9t\xC3\xA9", "name").ok());
  const absl::Status status = CheckUtf8("bad\xFFutf8", "tensor 'x'");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "tensor 'x': invalid UTF-8 byte at index 3: 0xFF");
}

}  // namespace
}  // namespace gpipe

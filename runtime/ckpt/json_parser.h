// A strict JSON parser (RFC 8259) for headers gpipe reads (safetensors): no comments, no
// trailing commas, no NaN, no leading zeros, valid UTF-8 only, duplicate object keys rejected,
// nesting at most kMaxJsonDepth. Numbers keep their literal text so integers stay exact.
// Errors give the byte offset and what was expected.
#ifndef GPIPE_RUNTIME_CKPT_JSON_PARSER_H_
#define GPIPE_RUNTIME_CKPT_JSON_PARSER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpipe {

inline constexpr int kMaxJsonDepth = 64;

class JsonValue {
 public:
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };

  static JsonValue Null() { return JsonValue(Kind::kNull); }
  static JsonValue Bool(bool value);
  // `literal` must be a valid JSON number; `value` its double value.
  static JsonValue Number(std::string literal, double value);
  static JsonValue String(std::string value);
  static JsonValue Array(std::vector<JsonValue> items);
  // Keys must be unique (the parser guarantees it).
  static JsonValue Object(std::vector<std::string> keys, std::vector<JsonValue> values);

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::kNull; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_number() const { return kind_ == Kind::kNumber; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_object() const { return kind_ == Kind::kObject; }

  // Accessors CHECK-fail on the wrong kind.
  bool bool_value() const;
  double number_value() const;
  // The number as written ("1.5e3").
  const std::string& number_literal() const;
  // The number when it is written as an integer (no fraction or exponent) within int64.
  std::optional<int64_t> AsInt64() const;
  const std::string& string_value() const;
  // Array elements, or object values in text order.
  const std::vector<JsonValue>& items() const;
  // Object keys in text order, parallel to items().
  const std::vector<std::string>& keys() const;
  // The object member named `key`, or nullptr.
  const JsonValue* Find(absl::string_view key) const;

  // "null", "boolean", "number", "string", "array", "object".
  static const char* KindName(Kind kind);

 private:
  explicit JsonValue(Kind kind) : kind_(kind) {}

  Kind kind_;
  bool bool_ = false;
  double number_ = 0;
  std::string text_;  // string value or number literal
  std::vector<std::string> keys_;
  std::vector<JsonValue> items_;
};

// Parses exactly one JSON value; whitespace may surround it, nothing else may follow.
// INVALID_ARGUMENT "invalid JSON at byte 12: expected ':' after an object key".
absl::StatusOr<JsonValue> ParseJson(absl::string_view text);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CKPT_JSON_PARSER_H_

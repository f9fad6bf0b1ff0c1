#include "runtime/ckpt/json_parser.h"

#include <charconv>
#include <cmath>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/check.h"
#include "runtime/core/json_text.h"
#include "runtime/core/status_macros.h"

namespace gpipe {

JsonValue JsonValue::Bool(bool value) {
  JsonValue v(Kind::kBool);
  v.bool_ = value;
  return v;
}

JsonValue JsonValue::Number(std::string literal, double value) {
  JsonValue v(Kind::kNumber);
  v.text_ = std::move(literal);
  v.number_ = value;
  return v;
}

JsonValue JsonValue::String(std::string value) {
  JsonValue v(Kind::kString);
  v.text_ = std::move(value);
  return v;
}

JsonValue JsonValue::Array(std::vector<JsonValue> items) {
  JsonValue v(Kind::kArray);
  v.items_ = std::move(items);
  return v;
}

JsonValue JsonValue::Object(std::vector<std::string> keys, std::vector<JsonValue> values) {
  GPIPE_CHECK(keys.size() == values.size());
  JsonValue v(Kind::kObject);
  v.keys_ = std::move(keys);
  v.items_ = std::move(values);
  return v;
}

bool JsonValue::bool_value() const {
  GPIPE_CHECK(is_bool()) << KindName(kind_);
  return bool_;
}

double JsonValue::number_value() const {
  GPIPE_CHECK(is_number()) << KindName(kind_);
  return number_;
}

const std::string& JsonValue::number_literal() const {
  GPIPE_CHECK(is_number()) << KindName(kind_);
  return text_;
}

std::optional<int64_t> JsonValue::AsInt64() const {
  if (!is_number() || text_.find_first_of(".eE") != std::string::npos) return std::nullopt;
  int64_t value = 0;
  const char* end = text_.data() + text_.size();
  const std::from_chars_result result = std::from_chars(text_.data(), end, value);
  if (result.ec != std::errc() || result.ptr != end) return std::nullopt;
  return value;
}

const std::string& JsonValue::string_value() const {
  GPIPE_CHECK(is_string()) << KindName(kind_);
  return text_;
}

const std::vector<JsonValue>& JsonValue::items() const {
  GPIPE_CHECK(is_array() || is_object()) << KindName(kind_);
  return items_;
}

const std::vector<std::string>& JsonValue::keys() const {
  GPIPE_CHECK(is_object()) << KindName(kind_);
  return keys_;
}

const JsonValue* JsonValue::Find(absl::string_view key) const {
  GPIPE_CHECK(is_object()) << KindName(kind_);
  for (size_t i = 0; i < keys_.size(); ++i) {
    if (keys_[i] == key) return &items_[i];
  }
  return nullptr;
}

const char* JsonValue::KindName(Kind kind) {
  switch (kind) {
    case Kind::kNull:
      return "null";
    case Kind::kBool:
      return "boolean";
    case Kind::kNumber:
      return "number";
    case Kind::kString:
      return "string";
    case Kind::kArray:
      return "array";
    case Kind::kObject:
      return "object";
  }
  return "unknown";
}

namespace {

class Parser {
 public:
  explicit Parser(absl::string_view text) : text_(text) {}

  absl::StatusOr<JsonValue> ParseDocument() {
    SkipSpace();
    ASSIGN_OR_RETURN(JsonValue value, ParseValue(0));
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected text after the JSON value");
    return value;
  }

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }

  void SkipSpace() {
    while (!AtEnd() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
                        text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  absl::Status Error(absl::string_view problem) const {
    return absl::InvalidArgumentError(absl::StrCat("invalid JSON at byte ", pos_, ": ", problem));
  }

  absl::StatusOr<JsonValue> ParseValue(int depth) {
    if (depth >= kMaxJsonDepth) {
      return Error(absl::StrCat("nesting deeper than ", kMaxJsonDepth, " levels"));
    }
    switch (Peek()) {
      case '{':
        return ParseObject(depth);
      case '[':
        return ParseArray(depth);
      case '"': {
        ASSIGN_OR_RETURN(std::string s, ParseString());
        return JsonValue::String(std::move(s));
      }
      case 't':
        return ParseWord("true", JsonValue::Bool(true));
      case 'f':
        return ParseWord("false", JsonValue::Bool(false));
      case 'n':
        return ParseWord("null", JsonValue::Null());
      default:
        break;
    }
    if (Peek() == '-' || (Peek() >= '0' && Peek() <= '9')) return ParseNumber();
    if (AtEnd()) return Error("unexpected end of text, expected a value");
    return Error(
        absl::StrCat("unexpected character '", std::string(1, Peek()), "', expected a value"));
  }

  absl::StatusOr<JsonValue> ParseWord(absl::string_view word, JsonValue value) {
    if (text_.substr(pos_, word.size()) != word) {
      return Error(absl::StrCat("expected '", word, "'"));
    }
    pos_ += word.size();
    return value;
  }

  absl::StatusOr<JsonValue> ParseObject(int depth) {
    ++pos_;  // '{'
    std::vector<std::string> keys;
    std::vector<JsonValue> values;
    absl::flat_hash_set<std::string> seen;
    SkipSpace();
    if (Peek() == '}') {
      ++pos_;
      return JsonValue::Object(std::move(keys), std::move(values));
    }
    while (true) {
      SkipSpace();
      if (Peek() != '"') return Error("expected a string key in an object");
      const size_t key_offset = pos_;
      ASSIGN_OR_RETURN(std::string key, ParseString());
      if (!seen.insert(key).second) {
        pos_ = key_offset;
        return Error(absl::StrCat("duplicate object key \"", key, "\""));
      }
      SkipSpace();
      if (Peek() != ':') return Error("expected ':' after an object key");
      ++pos_;
      SkipSpace();
      ASSIGN_OR_RETURN(JsonValue value, ParseValue(depth + 1));
      keys.push_back(std::move(key));
      values.push_back(std::move(value));
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      if (Peek() == '}') {
        ++pos_;
        return JsonValue::Object(std::move(keys), std::move(values));
      }
      return Error("expected ',' or '}' in an object");
    }
  }

  absl::StatusOr<JsonValue> ParseArray(int depth) {
    ++pos_;  // '['
    std::vector<JsonValue> items;
    SkipSpace();
    if (Peek() == ']') {
      ++pos_;
      return JsonValue::Array(std::move(items));
    }
    while (true) {
      SkipSpace();
      ASSIGN_OR_RETURN(JsonValue item, ParseValue(depth + 1));
      items.push_back(std::move(item));
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      if (Peek() == ']') {
        ++pos_;
        return JsonValue::Array(std::move(items));
      }
      return Error("expected ',' or ']' in an array");
    }
  }

  static bool IsDigit(char c) { return c >= '0' && c <= '9'; }

  absl::StatusOr<JsonValue> ParseNumber() {
    const size_t start = pos_;
    if (Peek() == '-') ++pos_;
    if (Peek() == '0') {
      ++pos_;
      if (IsDigit(Peek())) return Error("leading zeros are not allowed in numbers");
    } else if (IsDigit(Peek())) {
      while (IsDigit(Peek())) ++pos_;
    } else {
      return Error("expected a digit");
    }
    if (Peek() == '.') {
      ++pos_;
      if (!IsDigit(Peek())) return Error("expected a digit after '.'");
      while (IsDigit(Peek())) ++pos_;
    }
    if (Peek() == 'e' || Peek() == 'E') {
      ++pos_;
      if (Peek() == '+' || Peek() == '-') ++pos_;
      if (!IsDigit(Peek())) return Error("expected a digit in the exponent");
      while (IsDigit(Peek())) ++pos_;
    }
    std::string literal(text_.substr(start, pos_ - start));
    double value = 0;
    const std::from_chars_result result =
        std::from_chars(literal.data(), literal.data() + literal.size(), value);
    if (result.ec != std::errc() || !std::isfinite(value)) {
      pos_ = start;
      return Error(absl::StrCat("number ", literal, " is out of range"));
    }
    return JsonValue::Number(std::move(literal), value);
  }

  absl::StatusOr<uint32_t> ParseHex4() {
    if (pos_ + 4 > text_.size()) return Error("truncated \\u escape");
    uint32_t value = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_++];
      value <<= 4;
      if (c >= '0' && c <= '9') {
        value |= c - '0';
      } else if (c >= 'a' && c <= 'f') {
        value |= c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        value |= c - 'A' + 10;
      } else {
        --pos_;
        return Error("expected 4 hex digits after \\u");
      }
    }
    return value;
  }

  static void AppendUtf8(uint32_t code_point, std::string& out) {
    if (code_point < 0x80) {
      out.push_back(static_cast<char>(code_point));
    } else if (code_point < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
      out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
    } else if (code_point < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (code_point >> 12)));
      out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (code_point >> 18)));
      out.push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
    }
  }
  absl::StatusOr<std::string> ParseString() {
    ++pos_;  // '"'
    std::string out;
    while (true) {
      if (AtEnd()) return Error("unterminated string");
      const char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (static_cast<uint8_t>(c) < 0x20) {
        return Error("control character in a string (it must be escaped)");
      }
      if (static_cast<uint8_t>(c) >= 0x80) {
        const size_t length = Utf8SequenceLength(text_, pos_);
        if (length == 0) return Error("invalid UTF-8 in a string");
        out.append(text_.data() + pos_, length);
        pos_ += length;
        continue;
      }
      if (c != '\\') {
        out.push_back(c);
        ++pos_;
        continue;
      }
      ++pos_;
      const char escape = Peek();
      ++pos_;
      switch (escape) {
        case '"':
          out.push_back('"');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '/':
          out.push_back('/');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          ASSIGN_OR_RETURN(uint32_t unit, ParseHex4());
          if (unit >= 0xDC00 && unit <= 0xDFFF) return Error("unpaired low surrogate in \\u");
          if (unit >= 0xD800 && unit <= 0xDBFF) {
            if (text_.substr(pos_, 2) != "\\u") return Error("unpaired high surrogate in \\u");
            pos_ += 2;
            ASSIGN_OR_RETURN(uint32_t low, ParseHex4());
            if (low < 0xDC00 || low > 0xDFFF) return Error("unpaired high surrogate in \\u");
            unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
          }
          AppendUtf8(unit, out);
          break;
        }
        default:
          --pos_;
          return Error("invalid escape in a string");
      }
    }
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<JsonValue> ParseJson(absl::string_view text) { return Parser(text).ParseDocument(); }

}  // namespace gpipe

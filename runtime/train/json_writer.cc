#include "runtime/train/json_writer.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace gpipe {
namespace {

// Length of the valid UTF-8 sequence starting at text[i], or 0 when it is not valid
// (overlong forms, surrogates and code points above U+10FFFF are invalid).
size_t Utf8SequenceLength(absl::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
  const uint8_t lead = byte(i);
  size_t length;
  uint32_t code_point;
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    code_point = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    code_point = lead & 0x0F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    code_point = lead & 0x07;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    code_point = (code_point << 6) | (byte(i + k) & 0x3F);
  }
  if ((length == 3 && code_point < 0x800) || (length == 4 && code_point < 0x10000) ||
      (code_point >= 0xD800 && code_point <= 0xDFFF) || code_point > 0x10FFFF) {
    return 0;
  }
  return length;
}

}  // namespace

std::string JsonQuote(absl::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out.push_back('"');
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    switch (c) {
      case '"':
        out += "\\\"";
        ++i;
        continue;
      case '\\':
        out += "\\\\";
        ++i;
        continue;
      case '\b':
        out += "\\b";
        ++i;
        continue;
      case '\f':
        out += "\\f";
        ++i;
        continue;
      case '\n':
        out += "\\n";
        ++i;
        continue;
      case '\r':
        out += "\\r";
        ++i;
        continue;
      case '\t':
        out += "\\t";
        ++i;
        continue;
      default:
        break;
    }
    if (static_cast<uint8_t>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned>(c));
      out += escaped;
      ++i;
      continue;
    }
    const size_t length = Utf8SequenceLength(text, i);
    if (length == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD replaces one invalid byte.
      ++i;
      continue;
    }
    out.append(text.data() + i, length);
    i += length;
  }
  out.push_back('"');
  return out;
}

std::string JsonNumber(double value) {
  if (!std::isfinite(value)) return "null";
  // Shortest round-trip form (never more digits than %.17g).
  char buffer[64];
  const std::to_chars_result result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  std::string text(buffer, result.ptr);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";  // keep it a float: 3.0
  return text;
}

JsonObject& JsonObject::AddRaw(absl::string_view key, std::string json_value) {
  for (auto& field : fields_) {
    if (field.first == key) {
      field.second = std::move(json_value);
      return *this;
    }
  }
  fields_.emplace_back(std::string(key), std::move(json_value));
  return *this;
}

JsonObject& JsonObject::AddString(absl::string_view key, absl::string_view value) {
  return AddRaw(key, JsonQuote(value));
}

JsonObject& JsonObject::AddDouble(absl::string_view key, double value) {
  return AddRaw(key, JsonNumber(value));
}

JsonObject& JsonObject::AddInt(absl::string_view key, int64_t value) {
  return AddRaw(key, absl::StrCat(value));
}

JsonObject& JsonObject::AddBool(absl::string_view key, bool value) {
  return AddRaw(key, value ? "true" : "false");
}

JsonObject& JsonObject::AddNull(absl::string_view key) { return AddRaw(key, "null"); }

JsonObject& JsonObject::AddDoubleList(absl::string_view key, std::span<const double> values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) text.push_back(',');
    text += JsonNumber(values[i]);
  }
  text.push_back(']');
  return AddRaw(key, std::move(text));
}

JsonObject& JsonObject::AddIntList(absl::string_view key, std::span<const int64_t> values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) text.push_back(',');
    absl::StrAppend(&text, values[i]);
  }
  text.push_back(']');
  return AddRaw(key, std::move(text));
}

JsonObject& JsonObject::AddStringList(absl::string_view key, std::span<const std::string> values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) text.push_back(',');
    text += JsonQuote(values[i]);
  }
  text.push_back(']');
  return AddRaw(key, std::move(text));
}

JsonObject& JsonObject::AddObject(absl::string_view key, const JsonObject& value) {
  return AddRaw(key, value.ToString());
}

std::string JsonObject::ToString() const {
  std::string text = "{";
  for (size_t i = 0; i < fields_.size(); ++i) {
    if (i > 0) text.push_back(',');
    text += JsonQuote(fields_[i].first);
    text.push_back(':');
    text += fields_[i].second;
  }
  text.push_back('}');
  return text;
}

}  // namespace gpipe

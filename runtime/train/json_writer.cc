#include "runtime/train/json_writer.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace gpipe {
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

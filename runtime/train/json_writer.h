// JsonObject: builds one JSON object as text, keys in insertion order. Strings are escaped
// (quotes, backslashes, control characters; invalid UTF-8 becomes U+FFFD) so the output is
// always valid JSON; doubles are written in the shortest form that reads back to the same
// double (at most %.17g digits), non-finite doubles as null. Adding a key again replaces it.
#ifndef GPIPE_RUNTIME_TRAIN_JSON_WRITER_H_
#define GPIPE_RUNTIME_TRAIN_JSON_WRITER_H_

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "runtime/core/json_text.h"

namespace gpipe {

// `value` as a JSON number ("0.1", "3.0", "1e+300") or "null" when it is not finite.
std::string JsonNumber(double value);

class JsonObject {
 public:
  JsonObject& AddString(absl::string_view key, absl::string_view value);
  JsonObject& AddDouble(absl::string_view key, double value);
  JsonObject& AddInt(absl::string_view key, int64_t value);
  JsonObject& AddBool(absl::string_view key, bool value);
  JsonObject& AddNull(absl::string_view key);
  JsonObject& AddDoubleList(absl::string_view key, std::span<const double> values);
  JsonObject& AddIntList(absl::string_view key, std::span<const int64_t> values);
  JsonObject& AddStringList(absl::string_view key, std::span<const std::string> values);
  JsonObject& AddObject(absl::string_view key, const JsonObject& value);

  bool empty() const { return fields_.empty(); }
  // Compact text on one line: {"step":3,"loss":0.25}.
  std::string ToString() const;

 private:
  JsonObject& AddRaw(absl::string_view key, std::string json_value);

  // (key, value already rendered as JSON text).
  std::vector<std::pair<std::string, std::string>> fields_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_TRAIN_JSON_WRITER_H_

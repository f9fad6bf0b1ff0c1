#include "runtime/core/json_builder.h"

#include <cmath>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace gpipe {

bool StrictJsonBuilder::number_float(number_float_t value, const string_t& literal) {
  if (!std::isfinite(value)) return Fail(absl::StrCat(": number ", literal, " is out of range"));
  return Place(Json(value));
}

bool StrictJsonBuilder::binary(binary_t& /*value*/) {
  // JSON text has no binary values; only the binary formats nlohmann also reads do.
  return Fail(": a binary value");
}

bool StrictJsonBuilder::key(string_t& key) {
  Frame& frame = frames_.back();
  if (!frame.keys.insert(key).second) {
    return Fail(absl::StrCat(": duplicate object key \"", key, "\" in ", Path()));
  }
  frame.key = std::move(key);
  return true;
}

bool StrictJsonBuilder::parse_error(std::size_t position, const std::string& /*last_token*/,
                                    const nlohmann::detail::exception& e) {
  absl::string_view text = JsonExceptionText(e);
  // "parse error at line 1, column 9: syntax error ..." -> "(line 1, column 9): syntax error".
  if (absl::ConsumePrefix(&text, "parse error at ")) {
    const size_t colon = text.find(": ");
    if (colon != absl::string_view::npos) {
      error_ = absl::StrCat(" (", text.substr(0, colon), ")", text.substr(colon));
      return false;
    }
  }
  error_ = absl::StrCat(" (byte ", position, "): ", text);
  return false;
}

Json* StrictJsonBuilder::PlaceAndGet(Json value) {
  if (frames_.empty()) {
    root_ = std::move(value);
    return &root_;
  }
  Frame& frame = frames_.back();
  ++frame.index;
  if (frame.container->is_array()) {
    Json::array_t& array = frame.container->get_ref<Json::array_t&>();
    array.push_back(std::move(value));
    return &array.back();
  }
  // key() saw that the key is new: append without ordered_map's linear search for it.
  Json::object_t& object = frame.container->get_ref<Json::object_t&>();
  object.emplace_back(frame.key, std::move(value));
  return &object.back().second;
}

bool StrictJsonBuilder::Open(Json empty) {
  if (frames_.size() >= static_cast<size_t>(kMaxJsonDepth)) {
    return Fail(absl::StrCat(": nesting deeper than ", kMaxJsonDepth, " levels at ", Path()));
  }
  // Containers of open frames only grow at their end after their open child closed, so the
  // pointers on the stack stay valid.
  Json* container = PlaceAndGet(std::move(empty));
  frames_.push_back(Frame{.container = container});
  return true;
}

bool StrictJsonBuilder::Close() {
  frames_.pop_back();
  return true;
}

bool StrictJsonBuilder::Fail(std::string problem) {
  error_ = std::move(problem);
  return false;
}

std::string StrictJsonBuilder::Path() const {
  std::string path = "$";
  // Every frame but the innermost holds the open child its successor is.
  for (size_t i = 0; i + 1 < frames_.size(); ++i) {
    const Frame& frame = frames_[i];
    if (frame.container->is_array()) {
      absl::StrAppend(&path, "[", frame.index - 1, "]");
    } else {
      absl::StrAppend(&path, ".", frame.key);
    }
  }
  return path;
}

}  // namespace gpipe

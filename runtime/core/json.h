// JSON text <-> values, on nlohmann-json. ParseJson is strict (RFC 8259 plus: no duplicate
// object keys, nesting at most kMaxJsonDepth, finite numbers) and keeps object keys in text
// order; errors are INVALID_ARGUMENT naming the input and where the text goes wrong. Nothing
// here throws: nlohmann's exceptions become Status in JsonCall, the one place that catches them.
#ifndef GPIPE_RUNTIME_CORE_JSON_H_
#define GPIPE_RUNTIME_CORE_JSON_H_

#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace gpipe {

// Objects keep insertion (or text) order, so what gpipe writes comes out in a stable order.
using Json = nlohmann::ordered_json;

inline constexpr int kMaxJsonDepth = 64;

// nlohmann's exception text without its "[json.exception.type_error.302] " tag.
absl::string_view JsonExceptionText(const nlohmann::json::exception& e);

// Runs `read` (which may call .at(), .get<T>() or dump()) and returns its value, or
// INVALID_ARGUMENT "`what`: <nlohmann's reason>" when it throws.
template <typename Read>
absl::StatusOr<std::invoke_result_t<Read>> JsonCall(absl::string_view what, Read&& read) {
  try {
    return std::forward<Read>(read)();
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", JsonExceptionText(e)));
  }
}

// Exactly one JSON value; whitespace may surround it, nothing else may follow. `what` names the
// input in errors: "the header is not valid JSON (line 1, column 9): syntax error ...".
absl::StatusOr<Json> ParseJson(absl::string_view text, absl::string_view what);

// Compact one-line text ({"step":3,"loss":0.25}); doubles in shortest round-trip form with
// ".0" on whole numbers, non-finite doubles as null, invalid UTF-8 bytes as U+FFFD.
std::string DumpJson(const Json& value);

// OK when `text` is valid UTF-8, as JSON strings must be; else INVALID_ARGUMENT
// "`what`: invalid UTF-8 byte at index 3: 0xFF".
absl::Status CheckUtf8(absl::string_view text, absl::string_view what);

// `text` as a JSON string literal, quotes included (DumpJson of a string).
std::string JsonQuote(absl::string_view text);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CORE_JSON_H_

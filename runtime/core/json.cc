#include "runtime/core/json.h"

#include "runtime/core/json_builder.h"

namespace gpipe {

absl::string_view JsonExceptionText(const nlohmann::json::exception& e) {
  absl::string_view text = e.what();
  if (!text.empty() && text.front() == '[') {
    const size_t end = text.find("] ");
    if (end != absl::string_view::npos) text.remove_prefix(end + 2);
  }
  return text;
}

absl::StatusOr<Json> ParseJson(absl::string_view text, absl::string_view what) {
  // nlohmann's lexer takes a NUL byte for the end of the input; JSON text has none outside
  // strings, and inside them control characters must be escaped.
  if (const size_t nul = text.find('\0'); nul != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is not valid JSON (byte ", nul, "): a NUL byte"));
  }
  StrictJsonBuilder builder;
  absl::StatusOr<bool> parsed = JsonCall(what, [&] {
    return Json::sax_parse(text.begin(), text.end(), &builder, nlohmann::json::input_format_t::json,
                           /*strict=*/true, /*ignore_comments=*/false);
  });
  if (!parsed.ok()) return parsed.status();
  if (!*parsed) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is not valid JSON", builder.error()));
  }
  return std::move(builder.result());
}

std::string DumpJson(const Json& value) {
  // `replace` never throws (strict would on invalid UTF-8).
  return value.dump(/*indent=*/-1, /*indent_char=*/' ', /*ensure_ascii=*/false,
                    Json::error_handler_t::replace);
}

absl::Status CheckUtf8(absl::string_view text, absl::string_view what) {
  // The strict dump validates UTF-8 (and throws on invalid bytes).
  return JsonCall(what, [&] { return Json(std::string(text)).dump(); }).status();
}

std::string JsonQuote(absl::string_view text) { return DumpJson(Json(std::string(text))); }

}  // namespace gpipe

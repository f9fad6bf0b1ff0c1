// JSON text helpers shared by every module that writes or reads JSON (metrics, safetensors
// headers): UTF-8 validation and string quoting. Pure functions.
#ifndef GPIPE_RUNTIME_CORE_JSON_TEXT_H_
#define GPIPE_RUNTIME_CORE_JSON_TEXT_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace gpipe {

// Length of the valid UTF-8 sequence starting at text[i] (1 for ASCII), or 0 when it is not
// valid (overlong forms, surrogates and code points above U+10FFFF are invalid).
size_t Utf8SequenceLength(absl::string_view text, size_t i);

// Whether every byte of `text` belongs to a valid UTF-8 sequence.
bool IsValidUtf8(absl::string_view text);

// `text` as a JSON string literal, quotes included: escapes quotes, backslashes and control
// characters; invalid UTF-8 bytes become U+FFFD.
std::string JsonQuote(absl::string_view text);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CORE_JSON_TEXT_H_

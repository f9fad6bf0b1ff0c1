// Better text-proto parser errors. Protobuf reports an unknown field or enum value at the token
// AFTER the offending name; this moves the position back onto the name and adds what to write
// instead ("did you mean ...", the allowed values). Internal to the plan module.
#ifndef GPIPE_RUNTIME_PLAN_PARSE_ERROR_HINTS_H_
#define GPIPE_RUNTIME_PLAN_PARSE_ERROR_HINTS_H_

#include <string>

#include "google/protobuf/descriptor.h"

namespace gpipe {

struct ParseError {
  int line = 0;    // 0-based, as protobuf's ErrorCollector reports it
  int column = 0;  // 0-based; a tab advances to the next multiple of 8
  std::string message;
};

// Returns `error` with its position on the offending token of `text` and a hint appended, for
// the error kinds it knows (fields and enum values of messages in `file`); else `error` as is.
ParseError ImproveParseError(const std::string& text, const ParseError& error,
                             const google::protobuf::FileDescriptor& file);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_PLAN_PARSE_ERROR_HINTS_H_

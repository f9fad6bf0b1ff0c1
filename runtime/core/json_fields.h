// Reading fields of parsed JSON without exceptions. JsonFind and JsonAsInt64 answer "absent"
// for callers with their own messages; the Get* getters return INVALID_ARGUMENT naming the
// field ("field \"dtype\": type must be string, but is number").
#ifndef GPIPE_RUNTIME_CORE_JSON_FIELDS_H_
#define GPIPE_RUNTIME_CORE_JSON_FIELDS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/core/json.h"

namespace gpipe {

// The member `key` of `object`, or nullptr when it is absent or `object` is not an object.
const Json* JsonFind(const Json& object, absl::string_view key);
inline const Json* JsonFind(const Json* object, absl::string_view key) {
  return object == nullptr ? nullptr : JsonFind(*object, key);
}

// The number when it was written as an integer (no fraction or exponent) within int64.
std::optional<int64_t> JsonAsInt64(const Json& value);

// The member `key` of `object`, which must be an object holding it.
absl::StatusOr<const Json*> GetJsonField(const Json& object, absl::string_view key);
absl::StatusOr<std::string> GetJsonString(const Json& object, absl::string_view key);
absl::StatusOr<bool> GetJsonBool(const Json& object, absl::string_view key);
// Any number (integers too).
absl::StatusOr<double> GetJsonDouble(const Json& object, absl::string_view key);
// An integer within int64 (see JsonAsInt64).
absl::StatusOr<int64_t> GetJsonInt64(const Json& object, absl::string_view key);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CORE_JSON_FIELDS_H_

#include "runtime/core/json_fields.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

std::string FieldName(absl::string_view key) { return absl::StrCat("field \"", key, "\""); }

}  // namespace

const Json* JsonFind(const Json& object, absl::string_view key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

std::optional<int64_t> JsonAsInt64(const Json& value) {
  if (value.is_number_unsigned()) {
    const uint64_t unsigned_value = value.get<uint64_t>();
    if (unsigned_value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return std::nullopt;
    }
    return static_cast<int64_t>(unsigned_value);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  return std::nullopt;
}

absl::StatusOr<const Json*> GetJsonField(const Json& object, absl::string_view key) {
  return JsonCall(FieldName(key), [&] { return &object.at(key); });
}

absl::StatusOr<std::string> GetJsonString(const Json& object, absl::string_view key) {
  return JsonCall(FieldName(key), [&] { return object.at(key).get<std::string>(); });
}

absl::StatusOr<bool> GetJsonBool(const Json& object, absl::string_view key) {
  return JsonCall(FieldName(key), [&] { return object.at(key).get<bool>(); });
}

absl::StatusOr<double> GetJsonDouble(const Json& object, absl::string_view key) {
  return JsonCall(FieldName(key), [&] { return object.at(key).get<double>(); });
}

absl::StatusOr<int64_t> GetJsonInt64(const Json& object, absl::string_view key) {
  ASSIGN_OR_RETURN(const Json* value, GetJsonField(object, key));
  if (std::optional<int64_t> integer = JsonAsInt64(*value)) return *integer;
  return absl::InvalidArgumentError(absl::StrCat(
      FieldName(key), ": type must be an integer within int64, but is ",
      value->is_number() ? absl::StrCat("the number ", DumpJson(*value)) : value->type_name()));
}

}  // namespace gpipe

#include "runtime/plan/plan_field.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace gpipe {

absl::StatusOr<std::string> PlanFieldValue(const pb::Plan& plan, absl::string_view dotted_name) {
  using google::protobuf::FieldDescriptor;
  const std::vector<std::string> parts = absl::StrSplit(dotted_name, '.');
  const google::protobuf::Message* message = &plan;
  std::string path;
  for (size_t i = 0; i < parts.size(); ++i) {
    const google::protobuf::Descriptor* type = message->GetDescriptor();
    const FieldDescriptor* field = type->FindFieldByName(parts[i]);
    path = path.empty() ? parts[i] : absl::StrCat(path, ".", parts[i]);
    if (field == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("'", path, "' is not a field of the plan (",
                                                     type->full_name(), " has no field '", parts[i],
                                                     "'; see proto/plan-reference.md)"));
    }
    if (field->is_repeated()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", path, "' is a list; name a single value"));
    }
    const google::protobuf::Reflection* reflection = message->GetReflection();
    const bool last = i + 1 == parts.size();
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (last) {
        return absl::InvalidArgumentError(
            absl::StrCat("'", path, "' is a message; name one of its fields"));
      }
      message = &reflection->GetMessage(*message, field);
      continue;
    }
    if (!last) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", path, "' is a value, not a message with fields"));
    }
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_STRING:
        return reflection->GetString(*message, field);
      case FieldDescriptor::CPPTYPE_ENUM:
        return std::string(reflection->GetEnum(*message, field)->name());
      case FieldDescriptor::CPPTYPE_BOOL:
        return std::string(reflection->GetBool(*message, field) ? "true" : "false");
      case FieldDescriptor::CPPTYPE_INT32:
        return absl::StrCat(reflection->GetInt32(*message, field));
      case FieldDescriptor::CPPTYPE_INT64:
        return absl::StrCat(reflection->GetInt64(*message, field));
      case FieldDescriptor::CPPTYPE_UINT32:
        return absl::StrCat(reflection->GetUInt32(*message, field));
      case FieldDescriptor::CPPTYPE_UINT64:
        return absl::StrCat(reflection->GetUInt64(*message, field));
      case FieldDescriptor::CPPTYPE_FLOAT:
        return absl::StrCat(reflection->GetFloat(*message, field));
      case FieldDescriptor::CPPTYPE_DOUBLE:
        return absl::StrCat(reflection->GetDouble(*message, field));
      case FieldDescriptor::CPPTYPE_MESSAGE:
        break;  // handled above
    }
  }
  return absl::InvalidArgumentError("name a field of the plan, e.g. checkpoint.dir");
}

}  // namespace gpipe

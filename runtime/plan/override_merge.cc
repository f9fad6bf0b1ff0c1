#include "runtime/plan/override_merge.h"

#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"

namespace gpipe {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// Forgets the locations of `path` and of everything below it.
void EraseSubtree(const std::string& path, LocationMap* locations) {
  const std::string as_message = path + ".";
  const std::string as_list = path + "[";
  for (auto it = locations->begin(); it != locations->end();) {
    const std::string& key = it->first;
    if (key == path || absl::StartsWith(key, as_message) || absl::StartsWith(key, as_list)) {
      locations->erase(it++);
    } else {
      ++it;
    }
  }
}

std::string Join(const std::string& prefix, const FieldDescriptor* field) {
  return prefix.empty() ? std::string(field->name()) : absl::StrCat(prefix, ".", field->name());
}

// The override sets `field`, a oneof member: the plan's other members (and their locations) go.
void ForgetOneofSiblings(const FieldDescriptor* field, const std::string& prefix,
                         LocationMap* locations) {
  const auto* oneof = field->containing_oneof();
  if (oneof == nullptr) return;
  for (int i = 0; i < oneof->field_count(); ++i) {
    if (oneof->field(i) != field) EraseSubtree(Join(prefix, oneof->field(i)), locations);
  }
}

// Clears, in `target`, every repeated field that `source` mentions, recursing through the
// singular messages `source` sets. Collects the paths of those singular messages.
void ClearReplacedLists(const Message& source, const LocationMap& source_locations,
                        const std::string& prefix, Message* target, LocationMap* locations,
                        absl::flat_hash_set<std::string>* message_paths) {
  const auto* descriptor = source.GetDescriptor();
  const auto* source_reflection = source.GetReflection();
  const auto* target_reflection = target->GetReflection();
  for (int f = 0; f < descriptor->field_count(); ++f) {
    const FieldDescriptor* field = descriptor->field(f);
    const std::string path = Join(prefix, field);
    if (field->is_repeated()) {
      if (source_reflection->FieldSize(source, field) > 0 || source_locations.contains(path)) {
        target_reflection->ClearField(target, field);
        EraseSubtree(path, locations);
      }
      continue;
    }
    if (!source_reflection->HasField(source, field)) continue;
    ForgetOneofSiblings(field, prefix, locations);
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      message_paths->insert(path);
      ClearReplacedLists(source_reflection->GetMessage(source, field), source_locations, path,
                         target_reflection->MutableMessage(target, field), locations,
                         message_paths);
    }
  }
}

}  // namespace

void MergeOverride(const pb::Plan& override_plan, const LocationMap& override_locations,
                   pb::Plan* plan, LocationMap* locations) {
  absl::flat_hash_set<std::string> message_paths;
  ClearReplacedLists(override_plan, override_locations, "", plan, locations, &message_paths);
  plan->MergeFrom(override_plan);
  for (const auto& [path, where] : override_locations) {
    // A message already opened in the plan keeps its first location; its fields move.
    if (message_paths.contains(path) && locations->contains(path)) continue;
    (*locations)[path] = where;
  }
}

}  // namespace gpipe

#include "runtime/plan/plan_defaults.h"

#include <filesystem>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace gpipe {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

void SetToDefault(const FieldDescriptor* field, const Reflection* reflection, Message* message) {
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      reflection->SetInt32(message, field, field->default_value_int32());
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      reflection->SetInt64(message, field, field->default_value_int64());
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      reflection->SetUInt32(message, field, field->default_value_uint32());
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      reflection->SetUInt64(message, field, field->default_value_uint64());
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      reflection->SetDouble(message, field, field->default_value_double());
      break;
    case FieldDescriptor::CPPTYPE_FLOAT:
      reflection->SetFloat(message, field, field->default_value_float());
      break;
    case FieldDescriptor::CPPTYPE_BOOL:
      reflection->SetBool(message, field, field->default_value_bool());
      break;
    case FieldDescriptor::CPPTYPE_ENUM:
      reflection->SetEnum(message, field, field->default_value_enum());
      break;
    case FieldDescriptor::CPPTYPE_STRING:
      reflection->SetString(message, field, field->default_value_string());
      break;
    case FieldDescriptor::CPPTYPE_MESSAGE:
      break;
  }
}

void FillDefaults(Message* message) {
  const auto* descriptor = message->GetDescriptor();
  const Reflection* reflection = message->GetReflection();
  for (int f = 0; f < descriptor->field_count(); ++f) {
    const FieldDescriptor* field = descriptor->field(f);
    const bool in_oneof = field->real_containing_oneof() != nullptr;
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (field->is_repeated()) {
        for (int i = 0; i < reflection->FieldSize(*message, field); ++i) {
          FillDefaults(reflection->MutableRepeatedMessage(message, field, i));
        }
      } else if (!in_oneof || reflection->HasField(*message, field)) {
        FillDefaults(reflection->MutableMessage(message, field));
      }
      continue;
    }
    if (field->is_repeated() || in_oneof || !field->has_default_value()) continue;
    if (!reflection->HasField(*message, field)) SetToDefault(field, reflection, message);
  }
}

}  // namespace

void MakeDefaultsExplicit(pb::Plan* plan) { FillDefaults(plan); }

std::string ResolvePlanPath(const std::string& directory, const std::string& path) {
  const std::filesystem::path given(path);
  if (given.is_absolute() || directory.empty()) return given.lexically_normal().string();
  return (std::filesystem::path(directory) / given).lexically_normal().string();
}

void ResolveDataPaths(const std::string& directory, pb::Plan* plan) {
  if (!plan->has_data()) return;
  pb::Data* data = plan->mutable_data();
  const auto resolve = [&directory](std::string* path) {
    *path = ResolvePlanPath(directory, *path);
  };
  switch (data->source_case()) {
    case pb::Data::kNpy: {
      pb::Npy* npy = data->mutable_npy();
      if (npy->has_inputs()) resolve(npy->mutable_inputs());
      if (npy->has_targets()) resolve(npy->mutable_targets());
      if (npy->has_eval_inputs()) resolve(npy->mutable_eval_inputs());
      if (npy->has_eval_targets()) resolve(npy->mutable_eval_targets());
      break;
    }
    case pb::Data::kIdx: {
      pb::Idx* idx = data->mutable_idx();
      if (idx->has_train_images()) resolve(idx->mutable_train_images());
      if (idx->has_train_labels()) resolve(idx->mutable_train_labels());
      if (idx->has_test_images()) resolve(idx->mutable_test_images());
      if (idx->has_test_labels()) resolve(idx->mutable_test_labels());
      break;
    }
    case pb::Data::kText:
      for (std::string& path : *data->mutable_text()->mutable_paths()) resolve(&path);
      break;
    case pb::Data::kTokens:
      if (data->tokens().has_path()) resolve(data->mutable_tokens()->mutable_path());
      break;
    case pb::Data::kSynthetic:
    case pb::Data::kCustom:  // settings go to the program's factory as written
    case pb::Data::SOURCE_NOT_SET:
      break;
  }
}

}  // namespace gpipe

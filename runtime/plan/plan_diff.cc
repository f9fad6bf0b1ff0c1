#include "runtime/plan/plan_diff.h"

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/protobuf/text_format.h"

namespace gpipe {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

constexpr char kUnset[] = "(unset)";

// One value of `field` (element `index` when repeated) as plan text writes it.
std::string ValueText(const Message& message, const FieldDescriptor* field, int index) {
  std::string text;
  google::protobuf::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  printer.PrintFieldValueToString(message, field, index, &text);
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

class Differ {
 public:
  explicit Differ(std::vector<PlanDifference>& out) : out_(out) {}

  void Messages(const Message& before, const Message& now, const std::string& prefix) {
    const google::protobuf::Descriptor* type = now.GetDescriptor();
    for (int i = 0; i < type->field_count(); ++i) {
      const FieldDescriptor* field = type->field(i);
      const std::string name =
          prefix.empty() ? std::string(field->name()) : absl::StrCat(prefix, ".", field->name());
      if (field->is_repeated()) {
        Repeated(before, now, field, name);
      } else {
        Single(before, now, field, name);
      }
    }
  }

 private:
  void Single(const Message& before, const Message& now, const FieldDescriptor* field,
              const std::string& name) {
    const Reflection& b = *before.GetReflection();
    const Reflection& n = *now.GetReflection();
    const bool has_before = b.HasField(before, field);
    const bool has_now = n.HasField(now, field);
    if (!has_before && !has_now) return;
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (has_before && has_now) {
        Messages(b.GetMessage(before, field), n.GetMessage(now, field), name);
      } else {
        out_.push_back(PlanDifference{.field = name,
                                      .now = has_now ? "(set)" : kUnset,
                                      .before = has_before ? "(set)" : kUnset});
      }
      return;
    }
    const std::string was = has_before ? ValueText(before, field, -1) : kUnset;
    const std::string is = has_now ? ValueText(now, field, -1) : kUnset;
    if (was != is) out_.push_back(PlanDifference{.field = name, .now = is, .before = was});
  }

  void Repeated(const Message& before, const Message& now, const FieldDescriptor* field,
                const std::string& name) {
    const int size_before = before.GetReflection()->FieldSize(before, field);
    const int size_now = now.GetReflection()->FieldSize(now, field);
    if (size_before != size_now) {
      out_.push_back(PlanDifference{.field = name,
                                    .now = absl::StrCat(size_now, " entries"),
                                    .before = absl::StrCat(size_before, " entries")});
      return;
    }
    for (int i = 0; i < size_now; ++i) {
      const std::string element = absl::StrCat(name, "[", i, "]");
      if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        Messages(before.GetReflection()->GetRepeatedMessage(before, field, i),
                 now.GetReflection()->GetRepeatedMessage(now, field, i), element);
        continue;
      }
      const std::string was = ValueText(before, field, i);
      const std::string is = ValueText(now, field, i);
      if (was != is) out_.push_back(PlanDifference{.field = element, .now = is, .before = was});
    }
  }

  std::vector<PlanDifference>& out_;
};

}  // namespace

std::vector<PlanDifference> DiffPlans(const pb::Plan& before, const pb::Plan& now) {
  std::vector<PlanDifference> out;
  Differ(out).Messages(before, now, "");
  return out;
}

}  // namespace gpipe

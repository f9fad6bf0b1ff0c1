#include "runtime/plan/text_parse.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "runtime/plan/parse_error_hints.h"

namespace gpipe {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using google::protobuf::TextFormat;

// Collects parser errors as "source:line:col: message" with 1-based positions.
class CollectingErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  CollectingErrorCollector(const std::string& source, const std::string& text)
      : source_(source), text_(text) {}

  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    const ParseError error = ImproveParseError(text_, ParseError{line, column, message},
                                               *pb::Plan::descriptor()->file());
    errors_.push_back(
        absl::StrCat(source_, ":", error.line + 1, ":", error.column + 1, ": ", error.message));
  }

  const std::vector<std::string>& errors() const { return errors_; }

 private:
  const std::string& source_;
  const std::string& text_;
  std::vector<std::string> errors_;
};

void Record(const std::string& source, const TextFormat::ParseLocation& where,
            const std::string& path, LocationMap* locations) {
  if (where.line < 0) return;
  (*locations)[path] = SourceLocation{source, where.line + 1, where.column + 1};
}

// Walks the parsed message and its ParseInfoTree together. The tree cannot be enumerated, so the
// message's descriptor says which fields to ask about; every field written in the text has a
// location, including a repeated field written as an empty list `[]`.
void CollectLocations(const Message& message, const TextFormat::ParseInfoTree& tree,
                      const std::string& prefix, const std::string& source,
                      LocationMap* locations) {
  const auto* descriptor = message.GetDescriptor();
  const Reflection* reflection = message.GetReflection();
  for (int f = 0; f < descriptor->field_count(); ++f) {
    const FieldDescriptor* field = descriptor->field(f);
    const std::string path =
        prefix.empty() ? std::string(field->name()) : absl::StrCat(prefix, ".", field->name());
    const bool is_message = field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
    if (!field->is_repeated()) {
      Record(source, tree.GetLocation(field, -1), path, locations);
      const TextFormat::ParseInfoTree* nested =
          is_message ? tree.GetTreeForNested(field, -1) : nullptr;
      if (nested != nullptr && reflection->HasField(message, field)) {
        CollectLocations(reflection->GetMessage(message, field), *nested, path, source, locations);
      }
      continue;
    }
    Record(source, tree.GetLocation(field, 0), path, locations);
    const int size = reflection->FieldSize(message, field);
    // Protobuf records one location per mention of the field, and a list `[a, b]` is one
    // mention: elements have locations of their own only when every element was its own mention.
    int mentions = 0;
    while (tree.GetLocation(field, mentions).line >= 0) ++mentions;
    const bool per_element = is_message || mentions == size;
    for (int i = 0; i < size; ++i) {
      const std::string element = absl::StrCat(path, "[", i, "]");
      if (per_element) Record(source, tree.GetLocation(field, i), element, locations);
      const TextFormat::ParseInfoTree* nested =
          is_message ? tree.GetTreeForNested(field, i) : nullptr;
      if (nested != nullptr) {
        CollectLocations(reflection->GetRepeatedMessage(message, field, i), *nested, element,
                         source, locations);
      }
    }
  }
}

}  // namespace

absl::Status ParsePlanWithLocations(const std::string& text, const std::string& source_name,
                                    pb::Plan* plan, LocationMap* locations) {
  CollectingErrorCollector errors(source_name, text);
  TextFormat::ParseInfoTree tree;
  TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(&tree);
  parser.AllowUnknownField(false);
  parser.AllowUnknownExtension(false);
  parser.AllowPartialMessage(true);  // required-ness is checked by the analysis, with locations
  // Every pass over a plan recurses along its nesting: a bound keeps hostile plans from
  // overflowing the stack (a residual block is two levels).
  parser.SetRecursionLimit(kMaxPlanNesting);
  plan->Clear();
  if (!parser.ParseFromString(text, plan) || !errors.errors().empty()) {
    if (errors.errors().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source_name, ": not a valid plan (protobuf text format)"));
    }
    return absl::InvalidArgumentError(absl::StrJoin(errors.errors(), "\n"));
  }
  locations->clear();
  CollectLocations(*plan, tree, "", source_name, locations);
  return absl::OkStatus();
}

}  // namespace gpipe

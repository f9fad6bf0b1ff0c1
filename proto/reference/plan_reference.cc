// Writes the plan reference (proto/plan-reference.md) from plan.proto's comments.
//
// Usage: plan_reference_generator DESCRIPTOR_SET OUT.md
// DESCRIPTOR_SET is protoc's --include_source_info --include_imports --descriptor_set_out of
// proto/plan.proto. Starting at gpipe.pb.Plan, every reachable message (depth first, in field
// order, each once) gets a section with its comment and fields, and every reachable enum one with
// its values. Output depends only on the descriptors, so it is byte-for-byte reproducible.
//
// A field's default is the one gpipe applies: a declared [default = ...] is exactly what the plan
// loader writes into every unset field (runtime/plan/plan_defaults.cc); a field without one must
// say in its comment that it is "Required" or what its default is ("(default ...", "Default:"),
// and the generator fails naming any field that does neither, or that has no comment.
#include <cctype>
#include <charconv>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"

namespace gpipe {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::EnumDescriptor;
using google::protobuf::EnumValueDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptorSet;
using google::protobuf::OneofDescriptor;
using google::protobuf::SourceLocation;

constexpr char kRootMessage[] = "gpipe.pb.Plan";
constexpr char kRegenerateCommand[] = "cmake --build build --target plan_reference";

// Leading and trailing comments of a declaration, one string per line, without the single space
// after `//` and without trailing blank lines. Detached comments (section banners) are dropped.
template <typename DescriptorT>
std::vector<std::string> CommentLines(const DescriptorT* declaration) {
  SourceLocation location;
  std::vector<std::string> lines;
  if (!declaration->GetSourceLocation(&location)) return lines;
  for (const std::string* text : {&location.leading_comments, &location.trailing_comments}) {
    std::istringstream stream(*text);
    std::string line;
    while (std::getline(stream, line)) {
      if (!line.empty() && line.front() == ' ') line.erase(0, 1);
      while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
      lines.push_back(line);
    }
    while (!lines.empty() && lines.back().empty()) lines.pop_back();
  }
  return lines;
}

// Markdown text of a comment's words: outside code spans, a `*` touching a word and a `<` before a
// letter are escaped, so "stages*v" or "<name>" read as written instead of emphasis or a tag.
std::string Escaped(const std::string& text) {
  std::string escaped;
  bool in_code = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '`') in_code = !in_code;
    const bool spaced =
        (i == 0 || text[i - 1] == ' ') && (i + 1 == text.size() || text[i + 1] == ' ');
    if (!in_code && c == '*' && !spaced) {
      escaped += "\\*";
    } else if (!in_code && c == '<' && i + 1 < text.size() &&
               std::isalpha(static_cast<unsigned char>(text[i + 1]))) {
      escaped += "&lt;";
    } else {
      escaped += c;
    }
  }
  return escaped;
}

// A comment's paragraphs (split at blank lines), each on one line, so that a line starting with
// ">" or "-" inside a comment cannot turn into a quote or a list.
std::vector<std::string> Paragraphs(const std::vector<std::string>& lines) {
  std::vector<std::string> paragraphs;
  std::string paragraph;
  for (const std::string& line : lines) {
    size_t first = line.find_first_not_of(' ');
    if (first == std::string::npos) {
      if (!paragraph.empty()) paragraphs.push_back(Escaped(paragraph));
      paragraph.clear();
      continue;
    }
    if (!paragraph.empty()) paragraph += ' ';
    paragraph += line.substr(first);
  }
  if (!paragraph.empty()) paragraphs.push_back(Escaped(paragraph));
  return paragraphs;
}

std::string Joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& paragraph : Paragraphs(lines)) {
    if (!text.empty()) text += ' ';
    text += paragraph;
  }
  return text;
}

// Shortest text that reads back as `value`, with exponents written as 1e-5 rather than 1e-05.
std::string FormatDouble(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  std::string text(buffer, result.ptr);
  const size_t exponent = text.find('e');
  if (exponent != std::string::npos) {
    size_t digits = exponent + 1;
    if (digits < text.size() && (text[digits] == '-' || text[digits] == '+')) {
      if (text[digits] == '+') {
        text.erase(digits, 1);
      } else {
        ++digits;
      }
    }
    while (digits + 1 < text.size() && text[digits] == '0') text.erase(digits, 1);
  }
  return text;
}

std::string DeclaredDefault(const FieldDescriptor* field) {
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return std::to_string(field->default_value_int32());
    case FieldDescriptor::CPPTYPE_INT64:
      return std::to_string(field->default_value_int64());
    case FieldDescriptor::CPPTYPE_UINT32:
      return std::to_string(field->default_value_uint32());
    case FieldDescriptor::CPPTYPE_UINT64:
      return std::to_string(field->default_value_uint64());
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return FormatDouble(field->default_value_double());
    case FieldDescriptor::CPPTYPE_FLOAT:
      return FormatDouble(field->default_value_float());
    case FieldDescriptor::CPPTYPE_BOOL:
      return field->default_value_bool() ? "true" : "false";
    case FieldDescriptor::CPPTYPE_ENUM:
      return field->default_value_enum()->name();
    case FieldDescriptor::CPPTYPE_STRING:
      return "\"" + field->default_value_string() + "\"";
    case FieldDescriptor::CPPTYPE_MESSAGE:
      break;
  }
  return "";
}

std::string Anchor(const std::string& type_name) {
  std::string anchor;
  for (char c : type_name) anchor += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return anchor;
}

// A map's key or value type, or a field's element type: messages and enums link to their section.
std::string ElementType(const FieldDescriptor* field) {
  if (field->message_type() != nullptr) {
    return "[" + field->message_type()->name() + "](#" + Anchor(field->message_type()->name()) +
           ")";
  }
  if (field->enum_type() != nullptr) {
    return "[" + field->enum_type()->name() + "](#" + Anchor(field->enum_type()->name()) + ")";
  }
  return std::string("`") + field->type_name() + "`";
}

std::string TypeText(const FieldDescriptor* field) {
  if (field->is_map()) {
    return "map from " + ElementType(field->message_type()->map_key()) + " to " +
           ElementType(field->message_type()->map_value());
  }
  return field->is_repeated() ? "repeated " + ElementType(field) : ElementType(field);
}

// The field whose message or enum type the reference must describe too: for a map its value,
// not the synthetic entry message.
const FieldDescriptor* ReferencedType(const FieldDescriptor* field) {
  return field->is_map() ? field->message_type()->map_value() : field;
}

// The default column, or an error naming the field when its comment leaves the default open.
bool DefaultText(const FieldDescriptor* field, const std::string& comment, std::string* text,
                 std::string* error) {
  if (field->has_default_value()) {
    *text = "`" + DeclaredDefault(field) + "`";
  } else if (field->real_containing_oneof() != nullptr) {
    *text = "not chosen";
  } else if (comment.find("Required") != std::string::npos) {
    *text = "none (required)";
  } else if (comment.find("(default") != std::string::npos ||
             comment.find("Default:") != std::string::npos) {
    *text = "see meaning";
  } else if (field->is_repeated()) {
    *text = "empty";
  } else {
    *error = field->full_name() +
             " has no [default = ...] and its comment says neither \"Required\" nor its default "
             "(\"(default ...)\" or \"Default: ...\"); say in proto/plan.proto what an unset " +
             field->name() + " means";
    return false;
  }
  return true;
}

class ReferenceWriter {
 public:
  // Appends the sections of `message` and of every message and enum it reaches, depth first.
  bool AddMessage(const Descriptor* message) {
    if (!seen_messages_.insert(message->full_name()).second) return true;
    contents_.push_back(message->name());
    body_ << "## " << message->name() << "\n\n";
    for (const std::string& paragraph : Paragraphs(CommentLines(message))) {
      body_ << paragraph << "\n\n";
    }
    if (message->field_count() == 0) body_ << "No fields.\n\n";
    const OneofDescriptor* open_oneof = nullptr;
    for (int f = 0; f < message->field_count(); ++f) {
      const FieldDescriptor* field = message->field(f);
      const OneofDescriptor* oneof = field->real_containing_oneof();
      if (oneof != nullptr && oneof != open_oneof) AddOneofHeading(oneof);
      open_oneof = oneof;
      if (!AddField(field)) return false;
    }
    if (message->field_count() > 0) body_ << "\n";
    for (int f = 0; f < message->field_count(); ++f) {
      const FieldDescriptor* referenced = ReferencedType(message->field(f));
      if (referenced->message_type() != nullptr && !AddMessage(referenced->message_type())) {
        return false;
      }
      if (referenced->enum_type() != nullptr) AddEnum(referenced->enum_type());
    }
    return true;
  }

  const std::string& error() const { return error_; }

  std::string Document() const {
    std::ostringstream out;
    out << "<!-- Generated by proto/reference/plan_reference.cc from the comments of "
           "proto/plan.proto; do not edit. Regenerate with `"
        << kRegenerateCommand << "`. -->\n\n";
    out << "# The plan reference\n\n";
    out << "Every field of a plan (`gpipe.pb.Plan` in [plan.proto](plan.proto), written in "
           "protobuf text format), generated from the schema's comments. The default is what "
           "gpipe uses when a field is not written: a declared `[default = ...]` (the plan "
           "loader writes these into every unset field before the plan reaches the workers); "
           "\"none (required)\" for a field the plan check requires; \"see meaning\" where the "
           "comment gives the default, which may depend on other fields; \"empty\" for a list; "
           "\"not chosen\" for a member of a one-of group, where the group's comment says whether "
           "one must be chosen.\n\n";
    out << "Contents:";
    for (size_t i = 0; i < contents_.size(); ++i) {
      out << (i == 0 ? " " : ", ") << "[" << contents_[i] << "](#" << Anchor(contents_[i]) << ")";
    }
    out << ".\n\n";
    std::string body = body_.str();
    while (body.size() >= 2 && body.ends_with("\n\n")) body.pop_back();
    out << body;
    return out.str();
  }

 private:
  void AddOneofHeading(const OneofDescriptor* oneof) {
    body_ << "- one of `" << oneof->name() << "`";
    const std::string comment = Joined(CommentLines(oneof));
    if (!comment.empty()) body_ << ": " << comment;
    body_ << "\n";
  }

  bool AddField(const FieldDescriptor* field) {
    const std::vector<std::string> comment = CommentLines(field);
    if (comment.empty() && (field->message_type() == nullptr || field->is_map())) {
      error_ = field->full_name() + " has no comment; document it in proto/plan.proto";
      return false;
    }
    std::string default_text;
    if (!DefaultText(field, Joined(comment), &default_text, &error_)) return false;
    const bool in_oneof = field->real_containing_oneof() != nullptr;
    const std::string indent = in_oneof ? "  " : "";
    body_ << indent << "- `" << field->name() << "`: " << TypeText(field);
    if (in_oneof) body_ << ", in one of `" << field->real_containing_oneof()->name() << "`";
    body_ << "; default: " << default_text << ".";
    if (comment.empty()) {
      body_ << " See [" << field->message_type()->name() << "](#"
            << Anchor(field->message_type()->name()) << ").\n";
    } else {
      body_ << "\n" << indent << "  " << Joined(comment) << "\n";
    }
    return true;
  }

  void AddEnum(const EnumDescriptor* enumeration) {
    if (!seen_enums_.insert(enumeration->full_name()).second) return;
    contents_.push_back(enumeration->name());
    body_ << "## " << enumeration->name() << "\n\n";
    for (const std::string& paragraph : Paragraphs(CommentLines(enumeration))) {
      body_ << paragraph << "\n\n";
    }
    body_ << "Values:\n\n";
    for (int v = 0; v < enumeration->value_count(); ++v) {
      const EnumValueDescriptor* value = enumeration->value(v);
      body_ << "- `" << value->name() << "`";
      const std::string comment = Joined(CommentLines(value));
      if (!comment.empty()) body_ << ": " << comment;
      body_ << "\n";
    }
    body_ << "\n";
  }

  std::ostringstream body_;
  std::vector<std::string> contents_;
  std::set<std::string> seen_messages_;
  std::set<std::string> seen_enums_;
  std::string error_;
};

int Run(const std::string& descriptor_path, const std::string& out_path) {
  std::ifstream in(descriptor_path, std::ios::binary);
  FileDescriptorSet files;
  if (!in || !files.ParseFromIstream(&in)) {
    std::cerr << descriptor_path
              << ": cannot read a FileDescriptorSet (protoc --include_source_info "
                 "--include_imports --descriptor_set_out of proto/plan.proto)\n";
    return 1;
  }
  DescriptorPool pool;
  for (const auto& file : files.file()) {
    if (pool.BuildFile(file) == nullptr) {
      std::cerr << descriptor_path << ": " << file.name() << " does not build\n";
      return 1;
    }
  }
  const Descriptor* plan = pool.FindMessageTypeByName(kRootMessage);
  if (plan == nullptr) {
    std::cerr << descriptor_path << ": has no message " << kRootMessage << "\n";
    return 1;
  }
  ReferenceWriter writer;
  if (!writer.AddMessage(plan)) {
    std::cerr << "proto/plan.proto: " << writer.error() << "\n";
    return 1;
  }
  std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
  out << writer.Document();
  out.close();
  if (!out) {
    std::cerr << out_path << ": cannot write the plan reference\n";
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace gpipe

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: " << argv[0] << " DESCRIPTOR_SET OUT.md\n";
    return 2;
  }
  return gpipe::Run(argv[1], argv[2]);
}

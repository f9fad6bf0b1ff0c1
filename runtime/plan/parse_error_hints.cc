#include "runtime/plan/parse_error_hints.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace gpipe {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;

class IgnoreErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int, google::protobuf::io::ColumnNumber, const std::string&) override {}
};

// The text between the `n`-th pair of double quotes in `message` (0-based), if any.
std::optional<std::string> Quoted(const std::string& message, int n) {
  size_t pos = 0;
  for (int i = 0; i <= n; ++i) {
    const size_t open = message.find('"', pos);
    if (open == std::string::npos) return std::nullopt;
    const size_t close = message.find('"', open + 1);
    if (close == std::string::npos) return std::nullopt;
    if (i == n) return message.substr(open + 1, close - open - 1);
    pos = close + 1;
  }
  return std::nullopt;
}

// Start of the last token spelled `token` that begins before (line, column).
std::optional<std::pair<int, int>> LastTokenBefore(const std::string& text,
                                                   const std::string& token, int line, int column) {
  google::protobuf::io::ArrayInputStream input(text.data(), static_cast<int>(text.size()));
  IgnoreErrors ignore;
  google::protobuf::io::Tokenizer tokenizer(&input, &ignore);
  std::optional<std::pair<int, int>> found;
  while (tokenizer.Next()) {
    const auto& current = tokenizer.current();
    if (std::make_pair(current.line, current.column) >= std::make_pair(line, column)) break;
    if (current.text == token) found = std::make_pair(current.line, current.column);
  }
  return found;
}

int EditDistance(const std::string& a, const std::string& b) {
  std::vector<int> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int diagonal = row[0];
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const int above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string FieldHint(const std::string& message_type, const std::string& unknown,
                      const FileDescriptor& file) {
  const Descriptor* descriptor = file.pool()->FindMessageTypeByName(message_type);
  if (descriptor == nullptr) return "";
  std::vector<std::string> names;
  std::string closest;
  int best = static_cast<int>(unknown.size()) / 3 + 1;  // at most ~a third of it mistyped
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const std::string name(descriptor->field(i)->name());
    names.push_back(name);
    const int distance = EditDistance(unknown, name);
    if (distance <= best && (closest.empty() || distance < best)) {
      best = distance;
      closest = name;
    }
  }
  if (!closest.empty()) return absl::StrCat(" Did you mean \"", closest, "\"?");
  return absl::StrCat(" Fields of ", descriptor->name(), ": ", absl::StrJoin(names, ", "), ".");
}

// The enum type of the field called `field_name` in any message of `file` (when unambiguous).
const EnumDescriptor* EnumOfField(const std::string& field_name, const FileDescriptor& file) {
  const EnumDescriptor* found = nullptr;
  for (int m = 0; m < file.message_type_count(); ++m) {
    const FieldDescriptor* field = file.message_type(m)->FindFieldByName(field_name);
    if (field == nullptr || field->enum_type() == nullptr) continue;
    if (found != nullptr && found != field->enum_type()) return nullptr;
    found = field->enum_type();
  }
  return found;
}

std::string EnumHint(const std::string& field_name, const FileDescriptor& file) {
  const EnumDescriptor* type = EnumOfField(field_name, file);
  if (type == nullptr) return "";
  std::vector<std::string> values;
  for (int i = 0; i < type->value_count(); ++i) values.emplace_back(type->value(i)->name());
  return absl::StrCat(" Use one of: ", absl::StrJoin(values, ", "), ".");
}

}  // namespace

ParseError ImproveParseError(const std::string& text, const ParseError& error,
                             const FileDescriptor& file) {
  const std::string& message = error.message;
  std::optional<std::string> token;
  std::string hint;
  if (message.find("has no field named") != std::string::npos) {
    token = Quoted(message, 1);
    const auto type = Quoted(message, 0);
    if (token && type) hint = FieldHint(*type, *token, file);
  } else if (message.find("Unknown enumeration value") != std::string::npos) {
    token = Quoted(message, 0);
    const auto field = Quoted(message, 1);
    if (field) hint = EnumHint(*field, file);
  } else if (message.find("is specified multiple times") != std::string::npos ||
             message.find("another member of oneof") != std::string::npos) {
    token = Quoted(message, 0);
  }
  if (!token) return error;
  ParseError improved = error;
  improved.message += hint;
  if (const auto where = LastTokenBefore(text, *token, error.line, error.column)) {
    improved.line = where->first;
    improved.column = where->second;
  }
  return improved;
}

}  // namespace gpipe

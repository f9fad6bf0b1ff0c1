#include "runtime/ckpt/checkpoint_manifest.h"

#include <filesystem>
#include <limits>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "runtime/ckpt/checkpoint_layout.h"
#include "runtime/core/file_io.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

namespace fs = std::filesystem;

// The largest manifest read (a model with millions of tensors stays far below).
constexpr int64_t kMaxManifestBytes = int64_t{1} << 30;

class ErrorLines : public google::protobuf::io::ErrorCollector {
 public:
  explicit ErrorLines(const std::string& source) : source_(source) {}
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    lines_.push_back(absl::StrCat(source_, ":", line + 1, ":", column + 1, ": ", message));
  }
  void AddWarning(int line, google::protobuf::io::ColumnNumber column,
                  const std::string& message) override {
    AddError(line, column, message);
  }
  const std::vector<std::string>& lines() const { return lines_; }

 private:
  const std::string& source_;
  std::vector<std::string> lines_;
};

absl::Status Corrupt(const std::string& source, absl::string_view what) {
  return absl::DataLossError(absl::StrCat(source, ": ", what));
}

}  // namespace

absl::Status ValidateCheckpointManifest(const pb::CheckpointManifest& manifest,
                                        const std::string& source) {
  if (manifest.format_version() != kCheckpointFormatVersion) {
    return Corrupt(source, absl::StrCat("format_version is ", manifest.format_version(),
                                        "; this gpipe reads version ", kCheckpointFormatVersion));
  }
  if (manifest.step() < 0 || manifest.applied_steps() < 0 ||
      manifest.applied_steps() > manifest.step() || manifest.skipped_in_a_row() < 0) {
    return Corrupt(source, absl::StrCat("inconsistent counts: step ", manifest.step(),
                                        ", applied_steps ", manifest.applied_steps(),
                                        ", skipped_in_a_row ", manifest.skipped_in_a_row()));
  }
  if (manifest.dataset_size() < 0 || manifest.global_batch() < 0) {
    return Corrupt(source, "negative dataset_size or global_batch");
  }
  absl::flat_hash_set<std::string> files;
  for (int i = 0; i < manifest.shards_size(); ++i) {
    const pb::CheckpointShard& shard = manifest.shards(i);
    const std::string& file = shard.file();
    if (file.empty() || file.find('/') != std::string::npos || file == "." || file == ".." ||
        !file.ends_with(".safetensors")) {
      return Corrupt(source, absl::StrCat("shards[", i, "].file '", absl::CHexEscape(file),
                                          "' is not a .safetensors file name"));
    }
    if (!files.insert(file).second) {
      return Corrupt(source, absl::StrCat("shards[", i, "]: ", file, " is listed twice"));
    }
    if (shard.bytes() < 0) return Corrupt(source, absl::StrCat("shards[", i, "].bytes < 0"));
  }
  absl::flat_hash_set<std::string> names;
  for (int i = 0; i < manifest.tensors_size(); ++i) {
    const pb::CheckpointTensor& tensor = manifest.tensors(i);
    const std::string where =
        absl::StrCat("tensors[", i, "] '", absl::CHexEscape(tensor.name()), "'");
    if (tensor.name().empty() || !names.insert(tensor.name()).second) {
      return Corrupt(source, absl::StrCat(where, ": empty or listed twice"));
    }
    if (!tensor.has_kind()) return Corrupt(source, absl::StrCat(where, ": no kind"));
    if (tensor.shard() < 0 || tensor.shard() >= manifest.shards_size()) {
      return Corrupt(source, absl::StrCat(where, ": shard ", tensor.shard(), " is not one of the ",
                                          manifest.shards_size(), " shards"));
    }
    int64_t elements = 1;
    for (int64_t d : tensor.shape()) {
      if (d < 0 || (d != 0 && elements > (std::numeric_limits<int64_t>::max() / 8) / d)) {
        return Corrupt(source, absl::StrCat(where, ": shape [", absl::StrJoin(tensor.shape(), ", "),
                                            "] is negative or too large"));
      }
      elements *= d;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<pb::CheckpointManifest> ParseCheckpointManifest(const std::string& text,
                                                               const std::string& source) {
  pb::CheckpointManifest manifest;
  ErrorLines errors(source);
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  // The manifest holds a plan: the same nesting bound as a plan file's (text_parse.h), plus
  // the manifest's own level.
  parser.SetRecursionLimit(101);
  if (!parser.ParseFromString(text, &manifest)) {
    if (errors.lines().empty()) return Corrupt(source, "not a checkpoint manifest");
    return absl::DataLossError(absl::StrJoin(errors.lines(), "\n"));
  }
  RETURN_IF_ERROR(ValidateCheckpointManifest(manifest, source));
  return manifest;
}

absl::StatusOr<pb::CheckpointManifest> ReadCheckpointManifest(const std::string& checkpoint) {
  const std::string path = (fs::path(checkpoint) / kCheckpointManifestFile).string();
  std::error_code error;
  if (const uintmax_t size = fs::file_size(path, error);
      !error && size > static_cast<uintmax_t>(kMaxManifestBytes)) {
    return Corrupt(path,
                   absl::StrCat("the manifest is ", size, " bytes, more than ", kMaxManifestBytes));
  }
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  if (!text.ok()) {
    return absl::Status(
        text.status().code(),
        absl::StrCat(text.status().message(), " (", checkpoint,
                     " is not a complete checkpoint: its manifest is written last)"));
  }
  return ParseCheckpointManifest(*text, path);
}

absl::Status WriteCheckpointManifest(const std::string& checkpoint,
                                     const pb::CheckpointManifest& manifest) {
  std::string text;
  google::protobuf::TextFormat::Printer printer;
  if (!printer.PrintToString(manifest, &text)) {
    return absl::InternalError("could not print the checkpoint manifest");
  }
  return WriteFileAtomically(
      (fs::path(checkpoint) / kCheckpointManifestFile).string(),
      absl::StrCat("# gpipe checkpoint manifest (proto/checkpoint.proto)\n", text));
}

}  // namespace gpipe

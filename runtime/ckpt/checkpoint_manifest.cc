#include "runtime/ckpt/checkpoint_manifest.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "runtime/ckpt/checkpoint_layout.h"
#include "runtime/ckpt/crc32.h"
#include "runtime/ckpt/path_status.h"
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

// The manifest's text as written and as its checksum covers it (deterministic for a message).
absl::StatusOr<std::string> PrintManifest(const pb::CheckpointManifest& manifest) {
  std::string text;
  if (!google::protobuf::TextFormat::Printer().PrintToString(manifest, &text)) {
    return absl::InternalError("could not print the checkpoint manifest");
  }
  return text;
}

// The step of the directory holding `checkpoint` when it is named step-N, or -1.
int64_t StepOfDirectory(const std::string& checkpoint) {
  fs::path dir = fs::path(checkpoint).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();
  return CheckpointStepOfName(dir.filename().string());
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
  // Per name: whether it is stored whole, and the element ranges of its parts with their shape.
  struct Pieces {
    bool whole = false;
    std::vector<std::pair<int64_t, int64_t>> parts;
    int64_t elements = 0;
    int first = 0;  // index of its first entry
  };
  absl::flat_hash_map<std::string, Pieces> names;
  for (int i = 0; i < manifest.tensors_size(); ++i) {
    const pb::CheckpointTensor& tensor = manifest.tensors(i);
    const std::string where =
        absl::StrCat("tensors[", i, "] '", absl::CHexEscape(tensor.name()), "'");
    const bool part = tensor.has_element_begin() || tensor.has_element_end();
    const auto [seen, first] = names.try_emplace(tensor.name(), Pieces{.first = i});
    Pieces& pieces = seen->second;
    if (tensor.name().empty() || pieces.whole || (!first && !part)) {
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
    if (!first && pieces.elements != elements) {
      return Corrupt(source, absl::StrCat(where, ": its parts disagree on its shape"));
    }
    pieces.elements = elements;
    if (!part) {
      pieces.whole = true;
      continue;
    }
    if (tensor.element_begin() < 0 || tensor.element_end() <= tensor.element_begin() ||
        tensor.element_end() > elements) {
      return Corrupt(source, absl::StrCat(where, ": elements [", tensor.element_begin(), ", ",
                                          tensor.element_end(), ") of a tensor of ", elements));
    }
    pieces.parts.push_back({tensor.element_begin(), tensor.element_end()});
  }
  for (auto& [name, pieces] : names) {
    if (pieces.whole) continue;
    std::sort(pieces.parts.begin(), pieces.parts.end());
    int64_t covered = 0;
    for (const auto& [begin, end] : pieces.parts) {
      if (begin != covered) {  // a gap or an overlap
        covered = -1;
        break;
      }
      covered = end;
    }
    if (covered != pieces.elements) {
      return Corrupt(source, absl::StrCat("tensors[", pieces.first, "] '", absl::CHexEscape(name),
                                          "': its parts do not cover its ", pieces.elements,
                                          " elements exactly once"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> CheckpointManifestChecksum(const pb::CheckpointManifest& manifest) {
  pb::CheckpointManifest unsummed = manifest;
  unsummed.clear_manifest_crc32();
  ASSIGN_OR_RETURN(const std::string text, PrintManifest(unsummed));
  return Crc32(text);
}

absl::StatusOr<pb::CheckpointManifest> ParseCheckpointManifest(const std::string& text,
                                                               const std::string& source) {
  if (absl::StripAsciiWhitespace(text).empty()) {
    return absl::DataLossError(absl::StrCat(
        source, " is empty (a checkpoint interrupted before its manifest was written?)"));
  }
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
  if (manifest.has_manifest_crc32()) {
    ASSIGN_OR_RETURN(const uint32_t crc, CheckpointManifestChecksum(manifest));
    if (crc != manifest.manifest_crc32()) {
      return Corrupt(source, absl::StrCat("the manifest's checksum does not match its text (was it "
                                          "edited by hand?): manifest_crc32 is ",
                                          manifest.manifest_crc32(), ", the text's is ", crc));
    }
    manifest.clear_manifest_crc32();
  }
  RETURN_IF_ERROR(ValidateCheckpointManifest(manifest, source));
  return manifest;
}

absl::StatusOr<pb::CheckpointManifest> ReadCheckpointManifest(const std::string& checkpoint) {
  const std::string path = (fs::path(checkpoint) / kCheckpointManifestFile).string();
  ASSIGN_OR_RETURN(const PathStatus file, StatPath(path, FollowLinks::kYes));
  if (file.size > kMaxManifestBytes) {
    return Corrupt(
        path, absl::StrCat("the manifest is ", file.size, " bytes, more than ", kMaxManifestBytes));
  }
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  if (!text.ok()) {
    return absl::Status(
        text.status().code(),
        absl::StrCat(text.status().message(), " (", checkpoint,
                     " is not a complete checkpoint: its manifest is written last)"));
  }
  ASSIGN_OR_RETURN(pb::CheckpointManifest manifest, ParseCheckpointManifest(*text, path));
  if (const int64_t named = StepOfDirectory(checkpoint); named >= 0 && named != manifest.step()) {
    return Corrupt(path, absl::StrCat("the manifest says step ", manifest.step(),
                                      " but its directory is named ", CheckpointStepName(named),
                                      ": a checkpoint renamed or copied over another? (a copy "
                                      "under a name other than step-N is read as it is)"));
  }
  return manifest;
}

absl::Status WriteCheckpointManifest(const std::string& checkpoint,
                                     const pb::CheckpointManifest& manifest) {
  pb::CheckpointManifest summed = manifest;
  ASSIGN_OR_RETURN(const uint32_t crc, CheckpointManifestChecksum(manifest));
  summed.set_manifest_crc32(crc);
  ASSIGN_OR_RETURN(const std::string text, PrintManifest(summed));
  return WriteFileAtomically(
      (fs::path(checkpoint) / kCheckpointManifestFile).string(),
      absl::StrCat("# gpipe checkpoint manifest (proto/checkpoint.proto)\n", text));
}

}  // namespace gpipe

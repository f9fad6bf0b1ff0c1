#include "runtime/ckpt/hf_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "runtime/core/file_io.h"
#include "runtime/core/json.h"
#include "runtime/core/json_fields.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

constexpr char kSingleFile[] = "model.safetensors";
constexpr char kIndexFile[] = "model.safetensors.index.json";

absl::string_view View(const MappedFile& file) {
  return {reinterpret_cast<const char*>(file.bytes().data()), file.bytes().size()};
}

// The index's weight_map: tensor name -> shard file name (relative to the index's directory).
absl::StatusOr<std::map<std::string, std::string>> ReadIndex(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadWholeFile(path));
  absl::StatusOr<Json> index = ParseJson(text, path);
  if (!index.ok()) return index.status();
  const Json* map = JsonFind(*index, "weight_map");
  if (!index->is_object() || map == nullptr || !map->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        ": not a safetensors index: it needs a \"weight_map\" object of tensor name -> "
        "shard file"));
  }
  std::map<std::string, std::string> weight_map;
  for (const auto& [name, file] : map->items()) {
    if (!file.is_string() || file.get_ref<const std::string&>().empty() ||
        absl::StrContains(file.get_ref<const std::string&>(), "/")) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": weight_map[\"", name,
                       "\"] must name a shard file beside the index (no directories)"));
    }
    weight_map[name] = file.get<std::string>();
  }
  return weight_map;
}

}  // namespace

absl::StatusOr<HfCheckpoint> HfCheckpoint::Open(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code error;
  std::string index_path;
  std::string single_path = path;
  if (fs::is_directory(path, error)) {
    const std::string single = (fs::path(path) / kSingleFile).string();
    const std::string index = (fs::path(path) / kIndexFile).string();
    if (fs::exists(single, error)) {
      single_path = single;
    } else if (fs::exists(index, error)) {
      index_path = index;
    } else {
      return absl::NotFoundError(
          absl::StrCat(path, " is a directory without ", kSingleFile, " or ", kIndexFile,
                       "; give a .safetensors file or a directory that save_pretrained wrote"));
    }
  } else if (absl::EndsWith(path, ".index.json")) {
    index_path = path;
  }

  HfCheckpoint checkpoint;
  checkpoint.path_ = path;
  if (index_path.empty()) {
    absl::StatusOr<MappedFile> file = MappedFile::Open(single_path);
    if (!file.ok()) return file.status();
    RETURN_IF_ERROR(checkpoint.AddShard(std::move(*file)));
  } else {
    ASSIGN_OR_RETURN(const auto weight_map, ReadIndex(index_path));
    std::set<std::string> shard_names;
    for (const auto& [name, shard] : weight_map) shard_names.insert(shard);
    const fs::path directory = fs::path(index_path).parent_path();
    for (const std::string& shard : shard_names) {
      absl::StatusOr<MappedFile> file = MappedFile::Open((directory / shard).string());
      if (!file.ok()) {
        return WithContext(file.status(), absl::StrCat(index_path, " names shard ", shard));
      }
      RETURN_IF_ERROR(checkpoint.AddShard(std::move(*file)));
    }
    // The index and the shards must agree tensor by tensor.
    for (const auto& [name, shard] : weight_map) {
      const Tensor* tensor = checkpoint.Find(name);
      const std::string expected = (directory / shard).string();
      if (tensor == nullptr || tensor->file != expected) {
        return absl::InvalidArgumentError(absl::StrCat(index_path, ": weight_map puts \"", name,
                                                       "\" in ", shard, " but ", expected,
                                                       " holds no such tensor"));
      }
    }
    for (const Tensor& tensor : checkpoint.tensors_) {
      if (!weight_map.contains(tensor.name)) {
        return absl::InvalidArgumentError(
            absl::StrCat(tensor.file, " holds \"", tensor.name, "\" but ", index_path,
                         "'s weight_map does not list it; is the index from another save?"));
      }
    }
  }
  std::sort(checkpoint.tensors_.begin(), checkpoint.tensors_.end(),
            [](const Tensor& a, const Tensor& b) { return a.name < b.name; });
  for (int t = 0; t < static_cast<int>(checkpoint.tensors_.size()); ++t) {
    checkpoint.where_[checkpoint.tensors_[t].name].tensor = t;
  }
  return checkpoint;
}

absl::Status HfCheckpoint::AddShard(MappedFile file) {
  ASSIGN_OR_RETURN(SafetensorsLayout layout, ParseSafetensorsLayout(View(file), file.path()));
  const int shard = static_cast<int>(shards_.size());
  for (int e = 0; e < static_cast<int>(layout.entries.size()); ++e) {
    const SafetensorsEntry& entry = layout.entries[e];
    if (auto earlier = where_.find(entry.name); earlier != where_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("tensor \"", entry.name, "\" is in both ",
                                                     shards_[earlier->second.shard].file.path(),
                                                     " and ", file.path()));
    }
    where_[entry.name] =
        Location{.shard = shard, .entry = e, .tensor = static_cast<int>(tensors_.size())};
    tensors_.push_back(Tensor{
        .name = entry.name, .dtype = entry.dtype, .shape = entry.shape, .file = file.path()});
  }
  shards_.push_back(Shard{.file = std::move(file), .layout = std::move(layout)});
  return absl::OkStatus();
}

const HfCheckpoint::Tensor* HfCheckpoint::Find(const std::string& name) const {
  auto it = where_.find(name);
  return it == where_.end() ? nullptr : &tensors_[it->second.tensor];
}

absl::StatusOr<NamedTensorData> HfCheckpoint::Read(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) {
    return absl::NotFoundError(absl::StrCat(path_, " holds no tensor \"", name, "\""));
  }
  const Shard& shard = shards_[it->second.shard];
  return ReadSafetensorsEntry(View(shard.file), shard.layout,
                              shard.layout.entries[it->second.entry]);
}

}  // namespace gpipe

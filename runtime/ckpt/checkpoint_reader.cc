#include "runtime/ckpt/checkpoint_reader.h"

#include <filesystem>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/ckpt/crc32.h"
#include "runtime/ckpt/path_status.h"
#include "runtime/core/file_io.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

// The shard's bytes, checked against its manifest entry.
absl::StatusOr<std::string> ReadShard(const std::string& path, const pb::CheckpointShard& shard) {
  // A symlink loop is named as one, not as a missing shard.
  if (const absl::StatusOr<PathStatus> file = StatPath(path, FollowLinks::kYes); !file.ok()) {
    return absl::DataLossError(absl::StrCat("checkpoint shard ", file.status().message()));
  }
  absl::StatusOr<std::string> bytes = ReadWholeFile(path);
  if (!bytes.ok()) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint shard ", path, " is missing or unreadable: ", bytes.status().message()));
  }
  if (static_cast<int64_t>(bytes->size()) != shard.bytes()) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint shard ", path, " is ", bytes->size(), " bytes, the manifest says ",
        shard.bytes(), bytes->size() < static_cast<size_t>(shard.bytes()) ? " (truncated)" : ""));
  }
  if (const uint32_t crc = Crc32(*bytes); crc != shard.crc32()) {
    return absl::DataLossError(absl::StrCat("checkpoint shard ", path, " is corrupt: CRC-32 ", crc,
                                            ", the manifest says ", shard.crc32()));
  }
  return bytes;
}

}  // namespace

absl::StatusOr<std::vector<NamedTensorData>> ReadCheckpointTensors(
    const std::string& checkpoint, const pb::CheckpointManifest& manifest,
    std::span<const std::string> names) {
  absl::flat_hash_map<std::string, const pb::CheckpointTensor*> entries;
  for (const pb::CheckpointTensor& t : manifest.tensors()) entries.emplace(t.name(), &t);
  // Wanted tensors by shard, so each shard is read once.
  std::map<int, std::vector<size_t>> by_shard;
  for (size_t i = 0; i < names.size(); ++i) {
    const auto it = entries.find(names[i]);
    if (it == entries.end()) {
      return absl::NotFoundError(
          absl::StrCat("checkpoint ", checkpoint, " has no tensor '", names[i], "'"));
    }
    by_shard[it->second->shard()].push_back(i);
  }
  std::vector<NamedTensorData> out(names.size());
  for (const auto& [shard_index, wanted] : by_shard) {
    const pb::CheckpointShard& shard = manifest.shards(shard_index);
    const std::string path = (std::filesystem::path(checkpoint) / shard.file()).string();
    ASSIGN_OR_RETURN(const std::string bytes, ReadShard(path, shard));
    absl::StatusOr<SafetensorsContents> contents = ParseSafetensors(bytes, path);
    if (!contents.ok()) {
      return absl::DataLossError(
          absl::StrCat("checkpoint shard ", path, ": ", contents.status().message()));
    }
    absl::flat_hash_map<std::string, NamedTensorData*> held;
    for (NamedTensorData& t : contents->tensors) held.emplace(t.name, &t);
    for (size_t i : wanted) {
      const pb::CheckpointTensor& entry = *entries.at(names[i]);
      const auto it = held.find(names[i]);
      if (it == held.end()) {
        return absl::DataLossError(absl::StrCat("checkpoint shard ", path, " lacks tensor '",
                                                names[i], "' that the manifest places there"));
      }
      const std::vector<int64_t> expected(entry.shape().begin(), entry.shape().end());
      if (it->second->shape != expected) {
        return absl::DataLossError(
            absl::StrCat("checkpoint shard ", path, ": tensor '", names[i], "' has shape [",
                         absl::StrJoin(it->second->shape, ", "), "], the manifest says [",
                         absl::StrJoin(expected, ", "), "]"));
      }
      out[i] = std::move(*it->second);
    }
  }
  return out;
}

}  // namespace gpipe

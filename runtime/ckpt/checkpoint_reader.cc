#include "runtime/ckpt/checkpoint_reader.h"

#include <algorithm>
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
  // A name's entries: one for a whole tensor, one per part of a sharded one.
  absl::flat_hash_map<std::string, std::vector<const pb::CheckpointTensor*>> entries;
  for (const pb::CheckpointTensor& t : manifest.tensors()) entries[t.name()].push_back(&t);
  // Wanted entries by shard, so each shard is read once.
  std::map<int, std::vector<std::pair<size_t, const pb::CheckpointTensor*>>> by_shard;
  std::vector<NamedTensorData> out(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    const auto it = entries.find(names[i]);
    if (it == entries.end()) {
      return absl::NotFoundError(
          absl::StrCat("checkpoint ", checkpoint, " has no tensor '", names[i], "'"));
    }
    const pb::CheckpointTensor& first = *it->second.front();
    out[i].name = names[i];
    out[i].shape.assign(first.shape().begin(), first.shape().end());
    if (first.has_element_begin()) {
      // Assembled from its parts (ValidateCheckpointManifest: they cover it exactly once).
      int64_t elements = 1;
      for (int64_t d : first.shape()) elements *= d;
      out[i].values.resize(elements);
    }
    for (const pb::CheckpointTensor* entry : it->second)
      by_shard[entry->shard()].push_back({i, entry});
  }
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
    for (const auto& [i, entry] : wanted) {
      const auto it = held.find(names[i]);
      if (it == held.end()) {
        return absl::DataLossError(absl::StrCat("checkpoint shard ", path, " lacks tensor '",
                                                names[i], "' that the manifest places there"));
      }
      const bool part = entry->has_element_begin();
      const std::vector<int64_t> expected =
          part ? std::vector<int64_t>{entry->element_end() - entry->element_begin()}
               : std::vector<int64_t>(entry->shape().begin(), entry->shape().end());
      if (it->second->shape != expected) {
        return absl::DataLossError(
            absl::StrCat("checkpoint shard ", path, ": tensor '", names[i], "' has shape [",
                         absl::StrJoin(it->second->shape, ", "), "], the manifest says [",
                         absl::StrJoin(expected, ", "), "]",
                         part ? absl::StrCat(" (elements [", entry->element_begin(), ", ",
                                             entry->element_end(), ") of it)")
                              : ""));
      }
      if (part) {
        if (entry->element_begin() < 0 ||
            entry->element_end() > static_cast<int64_t>(out[i].values.size())) {
          return absl::DataLossError(absl::StrCat("checkpoint ", checkpoint, ": a part of '",
                                                  names[i], "' lies outside it"));
        }
        std::copy(it->second->values.begin(), it->second->values.end(),
                  out[i].values.begin() + entry->element_begin());
      } else {
        out[i] = std::move(*it->second);
      }
    }
  }
  return out;
}

}  // namespace gpipe

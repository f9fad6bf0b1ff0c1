#include "runtime/ckpt/safetensors_shards.h"

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/core/file_io.h"
#include "runtime/core/json.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

constexpr absl::string_view kSuffix = ".safetensors";

int64_t DataBytes(const NamedTensorData& tensor, SafetensorsDtype dtype) {
  return static_cast<int64_t>(tensor.values.size()) * (dtype == SafetensorsDtype::kBF16 ? 2 : 4);
}

}  // namespace

absl::StatusOr<ShardedExport> PlanShards(const std::string& path,
                                         const std::vector<NamedTensorData>& tensors,
                                         SafetensorsDtype dtype, int64_t shard_bytes) {
  ShardedExport plan;
  int shards = 1;
  int64_t filled = 0;
  for (const NamedTensorData& tensor : tensors) {
    const int64_t bytes = DataBytes(tensor, dtype);
    if (shard_bytes > 0 && filled > 0 && filled + bytes > shard_bytes) {
      ++shards;
      filled = 0;
    }
    filled += bytes;
    plan.shard_of.push_back(shards - 1);
  }
  if (shards == 1) {
    plan.shards = {path};
    return plan;
  }
  if (!absl::EndsWith(path, kSuffix)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--export ", path,
                     " must end in .safetensors when it is split into shards "
                     "(--export-shard-bytes): the shards are named after it"));
  }
  const std::string stem = path.substr(0, path.size() - kSuffix.size());
  for (int s = 1; s <= shards; ++s) {
    plan.shards.push_back(absl::StrFormat("%s-%05d-of-%05d%s", stem, s, shards, kSuffix));
  }
  plan.index = absl::StrCat(path, ".index.json");
  return plan;
}

absl::Status WriteShards(const ShardedExport& plan, const std::vector<NamedTensorData>& tensors,
                         const std::map<std::string, std::string>& metadata,
                         SafetensorsDtype dtype) {
  std::vector<std::vector<NamedTensorData>> parts(plan.shards.size());
  int64_t total = 0;
  Json weight_map = Json::object();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const int shard = plan.shard_of[i];
    parts[shard].push_back(tensors[i]);
    total += DataBytes(tensors[i], dtype);
    weight_map[tensors[i].name] = std::filesystem::path(plan.shards[shard]).filename().string();
  }
  for (size_t s = 0; s < parts.size(); ++s) {
    RETURN_IF_ERROR(WriteSafetensors(plan.shards[s], parts[s], metadata, dtype).status());
  }
  if (plan.index.empty()) return absl::OkStatus();
  // The index last: a reader that finds it finds every shard complete.
  const Json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  return WriteFileAtomically(plan.index, DumpJson(index) + "\n");
}

}  // namespace gpipe

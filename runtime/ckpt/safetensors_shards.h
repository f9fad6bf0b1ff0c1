// Safetensors exports split into shards the way Hugging Face's save_pretrained splits them:
// tensors in order, a new shard whenever the next tensor would take the current one past the
// limit (a tensor larger than the limit gets a shard of its own). One shard is written as the
// file asked for; N > 1 shards of "DIR/STEM.safetensors" are DIR/STEM-00001-of-0000N.safetensors
// ... and DIR/STEM.safetensors.index.json ({"metadata": {"total_size": data bytes},
// "weight_map": {tensor: shard file}}), which --init-from and from_pretrained read.
#ifndef GPIPE_RUNTIME_CKPT_SAFETENSORS_SHARDS_H_
#define GPIPE_RUNTIME_CKPT_SAFETENSORS_SHARDS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/ckpt/safetensors.h"

namespace gpipe {

// The files one export writes: the shards in order, then the index (when there are several).
struct ShardedExport {
  std::vector<std::string> shards;
  std::string index;  // empty for one shard
  // shard_of[i]: the shard tensor i goes to.
  std::vector<int> shard_of;
};

// Where `tensors` go for `path` and a limit of `shard_bytes` (0: no limit, one file).
// INVALID_ARGUMENT when sharding is asked for a path that does not end in ".safetensors".
absl::StatusOr<ShardedExport> PlanShards(const std::string& path,
                                         const std::vector<NamedTensorData>& tensors,
                                         SafetensorsDtype dtype, int64_t shard_bytes);

// Writes the shards of `plan` (each atomically, with `metadata`), then the index.
absl::Status WriteShards(const ShardedExport& plan, const std::vector<NamedTensorData>& tensors,
                         const std::map<std::string, std::string>& metadata,
                         SafetensorsDtype dtype);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CKPT_SAFETENSORS_SHARDS_H_

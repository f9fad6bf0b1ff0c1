// Reading tensors back from a checkpoint by name, whichever shards (stages) wrote them: what
// lets a checkpoint taken with K stages and D replicas resume under another K or D.
#ifndef GPIPE_RUNTIME_CKPT_CHECKPOINT_READER_H_
#define GPIPE_RUNTIME_CKPT_CHECKPOINT_READER_H_

#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/checkpoint.pb.h"
#include "runtime/ckpt/safetensors.h"

namespace gpipe {

// The tensors named `names` (in that order) from checkpoint directory `checkpoint` with manifest
// `manifest`. Every shard holding one of them is read whole and must have the manifest's size
// and CRC-32, parse as safetensors, and hold each wanted tensor with its manifest shape (a part
// of a sharded optimizer state as 1-D, of its range's size). A tensor saved in parts comes back
// whole, its parts put together.
// NOT_FOUND naming the checkpoint and tensor when the manifest has no such name; DATA_LOSS
// naming the file (and the tensor) for a missing, truncated, corrupt or inconsistent shard.
absl::StatusOr<std::vector<NamedTensorData>> ReadCheckpointTensors(
    const std::string& checkpoint, const pb::CheckpointManifest& manifest,
    std::span<const std::string> names);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CKPT_CHECKPOINT_READER_H_

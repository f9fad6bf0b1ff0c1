// Writing one checkpoint, in the order that keeps DIR/latest naming a complete checkpoint at every
// moment, whatever is killed when:
//   1. rank 0: PrepareCheckpoint makes DIR/step-N empty (first pointing `latest` elsewhere if it
//      named a step-N left by an earlier run);
//   2. every writing rank: WriteCheckpointShard (temporary file, fsync, rename);
//   3. rank 0, with every shard's entry: CommitCheckpoint writes the manifest (the checkpoint is
//      complete from here), points `latest` at it, then removes the checkpoints beyond keep_last.
#ifndef GPIPE_RUNTIME_CKPT_CHECKPOINT_WRITER_H_
#define GPIPE_RUNTIME_CKPT_CHECKPOINT_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/checkpoint.pb.h"
#include "runtime/ckpt/safetensors.h"

namespace gpipe {

// Rank 0, before any shard of step `step`: creates `dir` when missing and an empty
// `dir`/step-N, and returns its path. DATA_LOSS naming the path on a file-system error.
absl::StatusOr<std::string> PrepareCheckpoint(const std::string& dir, int64_t step);

// One stage's shard in checkpoint directory `checkpoint`; returns its manifest entry.
absl::StatusOr<pb::CheckpointShard> WriteCheckpointShard(
    const std::string& checkpoint, int stage, int stages,
    const std::vector<NamedTensorData>& tensors);

// Rank 0, after every shard: writes `manifest` into `checkpoint` (= dir/step-N), points
// dir/latest at it, removes the complete checkpoints beyond the newest `keep_last` (0: keep
// all) and incomplete older ones. Returns the directories removed.
absl::StatusOr<std::vector<std::string>> CommitCheckpoint(const std::string& dir,
                                                          const std::string& checkpoint,
                                                          const pb::CheckpointManifest& manifest,
                                                          int keep_last);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CKPT_CHECKPOINT_WRITER_H_

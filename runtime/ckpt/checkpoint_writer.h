// Writing one checkpoint, in the order that keeps DIR/latest naming a complete checkpoint at every
// moment, whatever is killed when:
//   1. rank 0: PrepareCheckpoint makes DIR/step-N empty (first pointing `latest` elsewhere if it
//      named a step-N left by an earlier run, which is removed then: the step-N name is this
//      run's from here on);
//   2. every writing rank: WriteCheckpointShard (temporary file, fsync, rename);
//   3. rank 0, with every shard's entry: CommitCheckpoint writes the manifest (the checkpoint is
//      complete from here), points `latest` at it, then removes what CheckpointRetention does not
//      keep, incomplete checkpoints and stray temporaries (checkpoint_retention.h).
// Rank 0 holds the directory's CheckpointDirLock (checkpoint_lock.h) throughout the job: what is
// removed in 3 is safe to remove only because no other job writes there.
#ifndef GPIPE_RUNTIME_CKPT_CHECKPOINT_WRITER_H_
#define GPIPE_RUNTIME_CKPT_CHECKPOINT_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/checkpoint.pb.h"
#include "runtime/ckpt/checkpoint_retention.h"
#include "runtime/ckpt/safetensors.h"

namespace gpipe {

// Rank 0, before any shard of step `step`: creates `dir` when missing and an empty
// `dir`/step-N, and returns its path. FAILED_PRECONDITION when `dir`/latest is not a regular file
// (CheckLatestPointer), so that nothing is written for a save that cannot commit; DATA_LOSS
// naming the path on a file-system error.
absl::StatusOr<std::string> PrepareCheckpoint(const std::string& dir, int64_t step);

// One stage's shard (replica 0's, or another replica's parts of a sharded optimizer state) in
// checkpoint directory `checkpoint`; returns its manifest entry.
absl::StatusOr<pb::CheckpointShard> WriteCheckpointShard(
    const std::string& checkpoint, int stage, int stages,
    const std::vector<NamedTensorData>& tensors, int replica = 0);

// Rank 0, after every shard: writes `manifest` into `checkpoint` (= dir/step-N), points
// dir/latest at it, then PruneCheckpoints with `retention`, removing temporaries older than this
// call. Returns the paths removed.
absl::StatusOr<std::vector<std::string>> CommitCheckpoint(const std::string& dir,
                                                          const std::string& checkpoint,
                                                          const pb::CheckpointManifest& manifest,
                                                          const CheckpointRetention& retention);
// The same with CheckpointRetention{.keep_last = keep_last}.
absl::StatusOr<std::vector<std::string>> CommitCheckpoint(const std::string& dir,
                                                          const std::string& checkpoint,
                                                          const pb::CheckpointManifest& manifest,
                                                          int keep_last);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CKPT_CHECKPOINT_WRITER_H_

// Where a checkpoint's files live, and the `latest` pointer. A checkpoint directory DIR holds one
// directory per checkpoint, DIR/step-NNNNNNNNN (the steps completed, nine digits), with a shard
// per stage (stage-SSS-of-KKK.safetensors; under training.shard_optimizer_state also one per
// stage and further replica holding its parts of the optimizer state,
// stage-SSS-of-KKK-replica-RRR.safetensors) and manifest.pbtxt, which is written last: a
// checkpoint is complete exactly when its manifest is. DIR/latest holds the name of the newest
// complete checkpoint and a newline, replaced atomically after its manifest is durable; it is a
// regular file or absent, never a link. DIR/lock is the job's CheckpointDirLock
// (checkpoint_lock.h). A symlink loop anywhere on a path is reported as one, never as absence.
#ifndef GPIPE_RUNTIME_CKPT_CHECKPOINT_LAYOUT_H_
#define GPIPE_RUNTIME_CKPT_CHECKPOINT_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpipe {

inline constexpr char kCheckpointManifestFile[] = "manifest.pbtxt";
inline constexpr char kCheckpointLatestFile[] = "latest";
inline constexpr char kCheckpointLockFile[] = "lock";
// What WriteFileAtomically puts between a file's name and its temporary's random suffix
// ("latest.tmp.Ab12Cd"): a crash between creating and renaming one leaves it behind.
inline constexpr char kTemporaryInfix[] = ".tmp.";

// "step-000000120".
std::string CheckpointStepName(int64_t step);
// "stage-003-of-004.safetensors" (replica 0), "stage-003-of-004-replica-002.safetensors".
std::string CheckpointShardName(int stage, int stages, int replica = 0);
// The step a step directory's name stands for ("step-000000120" -> 120), or -1 for another name.
int64_t CheckpointStepOfName(absl::string_view name);

// OK when DIR/latest is absent or a regular file; FAILED_PRECONDITION naming it when it is a
// symbolic link, directory, FIFO, ... (gpipe neither reads through nor replaces such a thing).
absl::Status CheckLatestPointer(const std::string& dir);
// The checkpoint named by DIR/latest (its directory's path). NOT_FOUND naming the file when there
// is none; FAILED_PRECONDITION as CheckLatestPointer's, or for a symlink loop on the way;
// DATA_LOSS when its contents are not a checkpoint name.
absl::StatusOr<std::string> ReadLatestCheckpoint(const std::string& dir);
// Points DIR/latest at `step_name` (atomically, durably). FAILED_PRECONDITION as
// CheckLatestPointer's: a link is never written through.
absl::Status WriteLatestCheckpoint(const std::string& dir, const std::string& step_name);

// The checkpoint --resume names: "latest" (DIR/latest of the plan's checkpoint.dir, which
// `checkpoint_dir` is; empty when the plan has none), a checkpoint directory (its latest), or one
// checkpoint's directory (holding manifest.pbtxt). NOT_FOUND / INVALID_ARGUMENT saying what was
// looked for; FAILED_PRECONDITION for a symlink loop.
absl::StatusOr<std::string> ResolveCheckpoint(const std::string& resume,
                                              const std::string& checkpoint_dir);

// Removes one step directory so that no moment leaves it looking complete: its manifest first
// (durably: the directory is fsynced), then the rest. A removal stopped half-way (a crash, an
// error) leaves an incomplete checkpoint, which no resume takes and the next save removes.
// DATA_LOSS naming the path when a removal fails.
absl::Status RemoveCheckpoint(const std::string& checkpoint);

// The step directories under `dir`, ascending by step (complete or not).
struct CheckpointEntry {
  int64_t step = 0;
  std::string path;
  bool complete = false;  // has a manifest
};
// An absent `dir` holds none. FAILED_PRECONDITION naming the path when `dir` cannot be read or a
// step-N entry or its manifest is a symlink loop or cannot be examined.
absl::StatusOr<std::vector<CheckpointEntry>> ScanCheckpoints(const std::string& dir);
// ScanCheckpoints with errors left out (an unreadable `dir` holds none, an unexaminable entry is
// skipped): for tests and reports, not for deciding what to remove.
std::vector<CheckpointEntry> ListCheckpoints(const std::string& dir);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CKPT_CHECKPOINT_LAYOUT_H_

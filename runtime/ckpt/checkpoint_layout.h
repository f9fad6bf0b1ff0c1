// Where a checkpoint's files live, and the `latest` pointer. A checkpoint directory DIR holds one
// directory per checkpoint, DIR/step-NNNNNNNNN (the steps completed, nine digits), with a shard
// per stage (stage-SSS-of-KKK.safetensors) and manifest.pbtxt, which is written last: a
// checkpoint is complete exactly when its manifest is. DIR/latest holds the name of the newest
// complete checkpoint and a newline, replaced atomically after its manifest is durable.
#ifndef GPIPE_RUNTIME_CKPT_CHECKPOINT_LAYOUT_H_
#define GPIPE_RUNTIME_CKPT_CHECKPOINT_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpipe {

inline constexpr char kCheckpointManifestFile[] = "manifest.pbtxt";
inline constexpr char kCheckpointLatestFile[] = "latest";

// "step-000000120".
std::string CheckpointStepName(int64_t step);
// "stage-003-of-004.safetensors".
std::string CheckpointShardName(int stage, int stages);

// The checkpoint named by DIR/latest (its directory's path). NOT_FOUND naming the file when there
// is none; DATA_LOSS when its contents are not a checkpoint name.
absl::StatusOr<std::string> ReadLatestCheckpoint(const std::string& dir);
// Points DIR/latest at `step_name` (atomically, durably).
absl::Status WriteLatestCheckpoint(const std::string& dir, const std::string& step_name);

// The checkpoint --resume names: "latest" (DIR/latest of the plan's checkpoint.dir, which
// `checkpoint_dir` is; empty when the plan has none), a checkpoint directory (its latest), or one
// checkpoint's directory (holding manifest.pbtxt). NOT_FOUND / INVALID_ARGUMENT saying what was
// looked for.
absl::StatusOr<std::string> ResolveCheckpoint(const std::string& resume,
                                              const std::string& checkpoint_dir);

// The step directories under `dir`, ascending by step (complete or not).
struct CheckpointEntry {
  int64_t step = 0;
  std::string path;
  bool complete = false;  // has a manifest
};
std::vector<CheckpointEntry> ListCheckpoints(const std::string& dir);

// After checkpoint `newest_step` is complete and `latest` names it: removes every complete
// checkpoint except the newest `keep_last` ones (0: none removed), and every incomplete one
// older than the newest (left by a crash). Returns the directories removed.
absl::StatusOr<std::vector<std::string>> PruneCheckpoints(const std::string& dir,
                                                          int64_t newest_step, int keep_last);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CKPT_CHECKPOINT_LAYOUT_H_

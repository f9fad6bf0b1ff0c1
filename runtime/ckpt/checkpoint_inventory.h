// What a checkpoint directory already holds, asked before a run writes there: rank 0 refuses a
// run that did not ask to resume or to start over when another run's complete checkpoints would
// be overwritten or pruned.
#ifndef GPIPE_RUNTIME_CKPT_CHECKPOINT_INVENTORY_H_
#define GPIPE_RUNTIME_CKPT_CHECKPOINT_INVENTORY_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/ckpt/checkpoint_layout.h"

namespace gpipe {

// The newest complete checkpoint under `dir`: the one `latest` names when its manifest reads
// (ReadCheckpointManifest: parses, checksum and step match), else the step directory of the
// highest step whose manifest reads. nullopt when `dir` is absent or holds none (step directories
// whose manifests are missing or do not read are not counted). FAILED_PRECONDITION when `dir`
// cannot be listed, a symlink loop is met, or `latest` is not a regular file
// (CheckLatestPointer).
absl::StatusOr<std::optional<CheckpointEntry>> NewestCompleteCheckpoint(const std::string& dir);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CKPT_CHECKPOINT_INVENTORY_H_

#include "runtime/ckpt/checkpoint_inventory.h"

#include <filesystem>
#include <vector>

#include "runtime/ckpt/checkpoint_manifest.h"
#include "runtime/core/status_macros.h"

namespace gpipe {

absl::StatusOr<std::optional<CheckpointEntry>> NewestCompleteCheckpoint(const std::string& dir) {
  RETURN_IF_ERROR(CheckLatestPointer(dir));
  ASSIGN_OR_RETURN(const std::vector<CheckpointEntry> entries, ScanCheckpoints(dir));
  if (entries.empty()) return std::nullopt;
  // `latest` preferred: the newest complete one by the writer's own record.
  if (absl::StatusOr<std::string> latest = ReadLatestCheckpoint(dir); latest.ok()) {
    if (absl::StatusOr<pb::CheckpointManifest> manifest = ReadCheckpointManifest(*latest);
        manifest.ok()) {
      return CheckpointEntry{manifest->step(), *latest, true};
    }
  }
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    if (it->complete && ReadCheckpointManifest(it->path).ok()) return *it;
  }
  return std::nullopt;
}

}  // namespace gpipe

#include "runtime/coord/checkpoint_claim.h"

#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/ckpt/checkpoint_inventory.h"
#include "runtime/ckpt/checkpoint_layout.h"
#include "runtime/ckpt/checkpoint_manifest.h"
#include "runtime/ckpt/checkpoint_probe.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

// Whether `path` lies inside `dir` (both absolute and normalized, as rank 0 keeps them).
bool Inside(const std::string& path, const std::string& dir) {
  const std::filesystem::path relative =
      std::filesystem::path(path).lexically_relative(std::filesystem::path(dir));
  return !relative.empty() && *relative.begin() != "..";
}

}  // namespace

absl::StatusOr<CheckpointDirLock> LockCheckpointDirectory(const std::string& dir) {
  ASSIGN_OR_RETURN(CheckpointDirLock lock, CheckpointDirLock::Acquire(dir));
  RETURN_IF_ERROR(CheckLatestPointer(dir));
  RETURN_IF_ERROR(ProbeCheckpointDirectory(dir));
  return lock;
}

absl::Status CheckNoTakeover(const std::string& dir, const std::optional<pb::ResumeFrom>& resume,
                             bool start_over) {
  if (start_over || (resume.has_value() && Inside(resume->dir(), dir))) return absl::OkStatus();
  const std::string ways =
      resume.has_value()
          ? absl::StrCat("this run resumes from ", resume->dir(),
                         ", outside it, and its saves would rewrite that run's `latest` and prune "
                         "its checkpoints: give this run a checkpoint.dir of its own, or move "
                         "those checkpoints away")
          : "continue it with --resume latest, or train from the first step with --start-over "
            "(its checkpoints are removed once this run's first checkpoint is complete)";
  ASSIGN_OR_RETURN(const std::optional<CheckpointEntry> newest, NewestCompleteCheckpoint(dir));
  if (newest.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint.dir ", dir, " holds a complete checkpoint of an earlier run (",
                     newest->path, ", step ", newest->step, "): ", ways));
  }
  // A manifest that does not read (damaged, edited, a newer gpipe's) still marks a checkpoint
  // that retention would count and prune.
  ASSIGN_OR_RETURN(const std::vector<CheckpointEntry> entries, ScanCheckpoints(dir));
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    if (!it->complete) continue;
    const absl::Status unreadable = ReadCheckpointManifest(it->path).status();
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint.dir ", dir, " holds ", it->path, ", whose manifest gpipe cannot read (",
        unreadable.message(), "); it may be another run's or another gpipe version's: ", ways));
  }
  return absl::OkStatus();
}

}  // namespace gpipe

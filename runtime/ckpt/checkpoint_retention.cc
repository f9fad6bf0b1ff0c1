#include "runtime/ckpt/checkpoint_retention.h"

#include <sys/stat.h>

#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/ckpt/checkpoint_layout.h"
#include "runtime/core/file_io.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

namespace fs = std::filesystem;

absl::Status Remove(const std::string& path, absl::string_view what) {
  std::error_code error;
  fs::remove_all(path, error);
  if (error) {
    return absl::DataLossError(
        absl::StrCat("removing ", what, " ", path, " failed: ", error.message()));
  }
  return absl::OkStatus();
}

// A temporary WriteFileAtomically leaves when killed between creating and renaming it, of one of
// the files gpipe writes there: `latest` in the checkpoint directory (in_checkpoint false), the
// manifest or a shard in a step directory.
bool IsStrayTemporary(absl::string_view name, bool in_checkpoint) {
  const size_t infix = name.rfind(kTemporaryInfix);
  if (infix == absl::string_view::npos) return false;
  const absl::string_view file = name.substr(0, infix);
  if (!in_checkpoint) return file == kCheckpointLatestFile;
  return file == kCheckpointManifestFile ||
         (absl::StartsWith(file, "stage-") && absl::EndsWith(file, ".safetensors"));
}

// Removes the stray temporaries in `dir` last modified before `before`, appending their paths.
absl::Status RemoveStrayTemporaries(const std::string& dir, bool in_checkpoint, absl::Time before,
                                    std::vector<std::string>& removed) {
  std::error_code error;
  std::vector<std::string> stray;
  fs::directory_iterator it(dir, error);
  for (; !error && it != fs::directory_iterator(); it.increment(error)) {
    if (!IsStrayTemporary(it->path().filename().string(), in_checkpoint)) continue;
    struct stat info;
    if (::lstat(it->path().c_str(), &info) != 0 || !S_ISREG(info.st_mode)) continue;
    if (absl::TimeFromTimespec(info.st_mtim) < before) stray.push_back(it->path().string());
  }
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot list ", dir, " for stray temporary files: ", error.message()));
  }
  for (const std::string& path : stray) {
    RETURN_IF_ERROR(Remove(path, "the stray temporary file"));
    removed.push_back(path);
  }
  if (!stray.empty()) RETURN_IF_ERROR(FsyncDirectory(dir));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> PruneCheckpoints(const std::string& dir,
                                                          int64_t newest_step,
                                                          const CheckpointRetention& retention,
                                                          absl::Time save_began) {
  ASSIGN_OR_RETURN(const std::vector<CheckpointEntry> entries, ScanCheckpoints(dir));
  const bool started_over = retention.this_runs_steps.has_value();
  int counted = 0;  // complete checkpoints counted toward keep_last, newest first
  std::vector<std::string> removed;
  std::vector<std::string> kept;  // complete ones
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    const bool counts =
        it->complete &&
        (started_over ? it->step == newest_step || retention.this_runs_steps->contains(it->step)
                      : it->step <= newest_step);
    bool remove = false;
    if (it->step == newest_step) {
      remove = false;
    } else if (!it->complete) {
      remove = true;  // only newest_step's is written now: the rest are a crash's
    } else if (!counts) {
      remove = started_over;  // an earlier run's; else one newer than this run has reached
    } else {
      remove = retention.keep_last > 0 && counted >= retention.keep_last;
    }
    if (counts) ++counted;
    if (!remove) {
      if (it->complete) kept.push_back(it->path);
      continue;
    }
    RETURN_IF_ERROR(RemoveCheckpoint(it->path));
    removed.push_back(it->path);
  }
  if (!removed.empty()) RETURN_IF_ERROR(FsyncDirectory(dir));
  RETURN_IF_ERROR(RemoveStrayTemporaries(dir, /*in_checkpoint=*/false, save_began, removed));
  for (const std::string& checkpoint : kept) {
    RETURN_IF_ERROR(
        RemoveStrayTemporaries(checkpoint, /*in_checkpoint=*/true, save_began, removed));
  }
  return removed;
}

}  // namespace gpipe

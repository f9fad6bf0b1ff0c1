#include "runtime/ckpt/checkpoint_writer.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/ckpt/checkpoint_layout.h"
#include "runtime/ckpt/checkpoint_manifest.h"
#include "runtime/ckpt/path_status.h"
#include "runtime/core/file_io.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

namespace fs = std::filesystem;

absl::Status FileSystemError(absl::string_view what, const std::string& path,
                             const std::error_code& error) {
  return absl::DataLossError(absl::StrCat(what, " ", path, " failed: ", error.message()));
}

// `latest` must never name a directory about to be emptied: point it at the newest complete
// checkpoint before `step`, or remove it when there is none.
absl::Status MoveLatestAwayFrom(const std::string& dir, const std::string& checkpoint,
                                int64_t step) {
  absl::StatusOr<std::string> latest = ReadLatestCheckpoint(dir);
  if (!latest.ok() || fs::path(*latest).filename() != fs::path(checkpoint).filename()) {
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const std::vector<CheckpointEntry> entries, ScanCheckpoints(dir));
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    if (it->step < step && it->complete) {
      return WriteLatestCheckpoint(dir, fs::path(it->path).filename().string());
    }
  }
  std::error_code error;
  const std::string path = (fs::path(dir) / kCheckpointLatestFile).string();
  fs::remove(path, error);
  if (error) return FileSystemError("removing", path, error);
  return FsyncDirectory(dir);
}

}  // namespace

absl::StatusOr<std::string> PrepareCheckpoint(const std::string& dir, int64_t step) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) return FileSystemError("creating the checkpoint directory", dir, error);
  RETURN_IF_ERROR(CheckLatestPointer(dir));
  const std::string checkpoint = (fs::path(dir) / CheckpointStepName(step)).string();
  ASSIGN_OR_RETURN(const PathStatus earlier, StatPath(checkpoint, FollowLinks::kNo));
  if (earlier.exists) {
    RETURN_IF_ERROR(MoveLatestAwayFrom(dir, checkpoint, step));
    RETURN_IF_ERROR(RemoveCheckpoint(checkpoint));
  }
  fs::create_directory(checkpoint, error);
  if (error) return FileSystemError("creating", checkpoint, error);
  RETURN_IF_ERROR(FsyncDirectory(dir));
  return checkpoint;
}

absl::StatusOr<pb::CheckpointShard> WriteCheckpointShard(
    const std::string& checkpoint, int stage, int stages,
    const std::vector<NamedTensorData>& tensors, int replica) {
  const std::string file = CheckpointShardName(stage, stages, replica);
  ASSIGN_OR_RETURN(const WrittenFile written,
                   WriteSafetensors((fs::path(checkpoint) / file).string(), tensors,
                                    {{"format", "gpipe-checkpoint"}}));
  pb::CheckpointShard shard;
  shard.set_file(file);
  shard.set_bytes(written.bytes);
  shard.set_crc32(written.crc32);
  shard.set_stage(stage);
  shard.set_replica(replica);
  return shard;
}

absl::StatusOr<std::vector<std::string>> CommitCheckpoint(const std::string& dir,
                                                          const std::string& checkpoint,
                                                          const pb::CheckpointManifest& manifest,
                                                          const CheckpointRetention& retention) {
  const absl::Time began = absl::Now();
  RETURN_IF_ERROR(ValidateCheckpointManifest(manifest, checkpoint));
  RETURN_IF_ERROR(WriteCheckpointManifest(checkpoint, manifest));
  RETURN_IF_ERROR(WriteLatestCheckpoint(dir, fs::path(checkpoint).filename().string()));
  return PruneCheckpoints(dir, manifest.step(), retention, began);
}

absl::StatusOr<std::vector<std::string>> CommitCheckpoint(const std::string& dir,
                                                          const std::string& checkpoint,
                                                          const pb::CheckpointManifest& manifest,
                                                          int keep_last) {
  return CommitCheckpoint(dir, checkpoint, manifest, CheckpointRetention{.keep_last = keep_last});
}

}  // namespace gpipe

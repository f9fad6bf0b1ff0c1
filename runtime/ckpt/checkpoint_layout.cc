#include "runtime/ckpt/checkpoint_layout.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "runtime/ckpt/path_status.h"
#include "runtime/core/file_io.h"
#include "runtime/core/output_path.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

namespace fs = std::filesystem;

constexpr char kStepPrefix[] = "step-";
// The longest `latest` file read: a step name and a newline, with room to spare.
constexpr int64_t kMaxLatestBytes = 256;

std::string LatestPath(const std::string& dir) {
  return (fs::path(dir) / kCheckpointLatestFile).string();
}

// `latest` as lstat sees it, refused unless absent or a regular file.
absl::StatusOr<PathStatus> LatestStatus(const std::string& dir) {
  const std::string path = LatestPath(dir);
  ASSIGN_OR_RETURN(const PathStatus latest, StatPath(path, FollowLinks::kNo));
  if (latest.exists && !latest.is_regular()) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " is ", FileKindName(latest.mode),
        ": gpipe keeps it a regular file naming the newest checkpoint and neither reads nor "
        "writes through anything else; remove it (the next checkpoint writes it again)"));
  }
  return latest;
}

absl::StatusOr<std::string> LatestWithContext(const std::string& dir, absl::string_view context) {
  absl::StatusOr<std::string> latest = ReadLatestCheckpoint(dir);
  if (!latest.ok()) return WithContext(latest.status(), context);
  return latest;
}

// The step directories; `strict`: every error is returned, otherwise what cannot be examined is
// left out.
absl::StatusOr<std::vector<CheckpointEntry>> Scan(const std::string& dir, bool strict) {
  std::vector<CheckpointEntry> entries;
  ASSIGN_OR_RETURN(const PathStatus top, StatPath(dir, FollowLinks::kYes));
  if (!top.exists) return entries;
  std::error_code error;
  fs::directory_iterator it(dir, error);
  for (; !error && it != fs::directory_iterator(); it.increment(error)) {
    const int64_t step = CheckpointStepOfName(it->path().filename().string());
    if (step < 0) continue;
    const std::string path = it->path().string();
    absl::StatusOr<PathStatus> entry = StatPath(path, FollowLinks::kYes);
    absl::StatusOr<PathStatus> manifest = PathStatus{};
    if (entry.ok() && entry->is_directory()) {
      manifest = StatPath((it->path() / kCheckpointManifestFile).string(), FollowLinks::kYes);
    }
    for (const absl::StatusOr<PathStatus>* checked : {&entry, &manifest}) {
      if (!checked->ok() && strict) return checked->status();
    }
    if (!entry.ok() || !entry->is_directory() || !manifest.ok()) continue;
    entries.push_back({step, path, manifest->is_regular()});
  }
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot list the checkpoint directory ", dir, ": ", error.message()));
  }
  std::sort(entries.begin(), entries.end(),
            [](const CheckpointEntry& a, const CheckpointEntry& b) { return a.step < b.step; });
  return entries;
}

}  // namespace

std::string CheckpointStepName(int64_t step) { return absl::StrFormat("step-%09d", step); }

std::string CheckpointShardName(int stage, int stages, int replica) {
  if (replica == 0) return absl::StrFormat("stage-%03d-of-%03d.safetensors", stage, stages);
  return absl::StrFormat("stage-%03d-of-%03d-replica-%03d.safetensors", stage, stages, replica);
}

int64_t CheckpointStepOfName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, kStepPrefix) || name.empty() || name.size() > 18) return -1;
  for (char c : name) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return -1;
  }
  int64_t step = -1;
  return absl::SimpleAtoi(name, &step) ? step : -1;
}

absl::Status CheckLatestPointer(const std::string& dir) { return LatestStatus(dir).status(); }

absl::StatusOr<std::string> ReadLatestCheckpoint(const std::string& dir) {
  const std::string path = LatestPath(dir);
  ASSIGN_OR_RETURN(const PathStatus latest, LatestStatus(dir));
  if (!latest.exists) {
    return absl::NotFoundError(
        absl::StrCat(path, " does not exist: ", dir, " holds no complete checkpoint"));
  }
  if (latest.size > kMaxLatestBytes) {
    return absl::DataLossError(
        absl::StrCat(path, " is ", latest.size, " bytes; it should hold one checkpoint name"));
  }
  ASSIGN_OR_RETURN(const std::string text, ReadWholeFile(path));
  const absl::string_view name = absl::StripAsciiWhitespace(text);
  if (CheckpointStepOfName(name) < 0) {
    return absl::DataLossError(absl::StrCat(path,
                                            " should name a checkpoint (step-NNNNNNNNN), not '",
                                            absl::CHexEscape(name.substr(0, 64)), "'"));
  }
  return (fs::path(dir) / std::string(name)).string();
}

absl::Status WriteLatestCheckpoint(const std::string& dir, const std::string& step_name) {
  RETURN_IF_ERROR(CheckLatestPointer(dir));
  return WriteFileAtomically(LatestPath(dir), absl::StrCat(step_name, "\n"));
}

absl::StatusOr<std::string> ResolveCheckpoint(const std::string& resume,
                                              const std::string& checkpoint_dir) {
  if (resume == "latest") {
    if (checkpoint_dir.empty()) {
      return absl::InvalidArgumentError(
          "--resume latest: the plan has no checkpoint.dir; name the checkpoint directory "
          "instead (--resume DIR or DIR/step-NNNNNNNNN)");
    }
    return LatestWithContext(checkpoint_dir, "--resume latest");
  }
  const std::string context = absl::StrCat("--resume ", resume);
  const absl::StatusOr<PathStatus> target = StatPath(resume, FollowLinks::kYes);
  if (!target.ok()) return WithContext(target.status(), context);
  if (!target->is_directory()) {
    return absl::NotFoundError(absl::StrCat(
        context,
        ": no such directory (a checkpoint directory, one of its step-* directories, or the word "
        "latest)"));
  }
  ASSIGN_OR_RETURN(
      const PathStatus manifest,
      StatPath((fs::path(resume) / kCheckpointManifestFile).string(), FollowLinks::kYes));
  if (manifest.exists) return resume;
  ASSIGN_OR_RETURN(const PathStatus latest, StatPath(LatestPath(resume), FollowLinks::kNo));
  if (latest.exists) return LatestWithContext(resume, context);
  return absl::NotFoundError(absl::StrCat(context, ": neither ", kCheckpointManifestFile, " nor ",
                                          kCheckpointLatestFile, " is there: not a checkpoint"));
}

absl::StatusOr<std::vector<CheckpointEntry>> ScanCheckpoints(const std::string& dir) {
  return Scan(dir, /*strict=*/true);
}

std::vector<CheckpointEntry> ListCheckpoints(const std::string& dir) {
  absl::StatusOr<std::vector<CheckpointEntry>> entries = Scan(dir, /*strict=*/false);
  return entries.ok() ? *std::move(entries) : std::vector<CheckpointEntry>();
}

absl::Status RemoveCheckpoint(const std::string& checkpoint) {
  std::error_code error;
  const std::filesystem::path manifest =
      std::filesystem::path(checkpoint) / kCheckpointManifestFile;
  if (std::filesystem::remove(manifest, error); error) {
    return absl::DataLossError(
        absl::StrCat("removing ", manifest.string(), " failed: ", error.message()));
  }
  RETURN_IF_ERROR(FsyncDirectory(checkpoint));
  std::filesystem::remove_all(checkpoint, error);
  if (error) {
    return absl::DataLossError(absl::StrCat("removing ", checkpoint, " failed: ", error.message()));
  }
  return absl::OkStatus();
}

}  // namespace gpipe

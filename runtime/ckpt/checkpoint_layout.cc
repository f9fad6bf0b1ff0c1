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
#include "runtime/core/file_io.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

namespace fs = std::filesystem;

constexpr char kStepPrefix[] = "step-";
// The longest `latest` file read: a step name and a newline, with room to spare.
constexpr size_t kMaxLatestBytes = 256;

// The step of a step directory's name, or -1.
int64_t StepOfName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, kStepPrefix) || name.empty() || name.size() > 18) return -1;
  for (char c : name) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return -1;
  }
  int64_t step = -1;
  return absl::SimpleAtoi(name, &step) ? step : -1;
}

bool HasManifest(const fs::path& dir) {
  std::error_code error;
  return fs::is_regular_file(dir / kCheckpointManifestFile, error);
}

}  // namespace

namespace {

absl::StatusOr<std::string> LatestWithContext(const std::string& dir, absl::string_view context) {
  absl::StatusOr<std::string> latest = ReadLatestCheckpoint(dir);
  if (!latest.ok()) return WithContext(latest.status(), context);
  return latest;
}

}  // namespace

std::string CheckpointStepName(int64_t step) { return absl::StrFormat("step-%09d", step); }

std::string CheckpointShardName(int stage, int stages) {
  return absl::StrFormat("stage-%03d-of-%03d.safetensors", stage, stages);
}

absl::StatusOr<std::string> ReadLatestCheckpoint(const std::string& dir) {
  const std::string path = (fs::path(dir) / kCheckpointLatestFile).string();
  std::error_code error;
  if (!fs::exists(path, error)) {
    return absl::NotFoundError(
        absl::StrCat(path, " does not exist: ", dir, " holds no complete checkpoint"));
  }
  if (const uintmax_t size = fs::file_size(path, error); !error && size > kMaxLatestBytes) {
    return absl::DataLossError(
        absl::StrCat(path, " is ", size, " bytes; it should hold one checkpoint name"));
  }
  ASSIGN_OR_RETURN(const std::string text, ReadWholeFile(path));
  const absl::string_view name = absl::StripAsciiWhitespace(text);
  if (StepOfName(name) < 0) {
    return absl::DataLossError(absl::StrCat(path,
                                            " should name a checkpoint (step-NNNNNNNNN), not '",
                                            absl::CHexEscape(name.substr(0, 64)), "'"));
  }
  return (fs::path(dir) / std::string(name)).string();
}

absl::Status WriteLatestCheckpoint(const std::string& dir, const std::string& step_name) {
  return WriteFileAtomically((fs::path(dir) / kCheckpointLatestFile).string(),
                             absl::StrCat(step_name, "\n"));
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
  std::error_code error;
  if (!fs::is_directory(resume, error)) {
    return absl::NotFoundError(
        absl::StrCat("--resume ", resume,
                     ": no such directory (a checkpoint directory, one of its step-* "
                     "directories, or the word latest)"));
  }
  if (HasManifest(resume)) return resume;
  if (fs::exists(fs::path(resume) / kCheckpointLatestFile, error)) {
    return LatestWithContext(resume, absl::StrCat("--resume ", resume));
  }
  return absl::NotFoundError(absl::StrCat("--resume ", resume, ": neither ",
                                          kCheckpointManifestFile, " nor ", kCheckpointLatestFile,
                                          " is there: not a checkpoint"));
}

std::vector<CheckpointEntry> ListCheckpoints(const std::string& dir) {
  std::vector<CheckpointEntry> entries;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
    const int64_t step = StepOfName(entry.path().filename().string());
    if (step < 0 || !entry.is_directory(error)) continue;
    entries.push_back({step, entry.path().string(), HasManifest(entry.path())});
  }
  std::sort(entries.begin(), entries.end(),
            [](const CheckpointEntry& a, const CheckpointEntry& b) { return a.step < b.step; });
  return entries;
}

absl::StatusOr<std::vector<std::string>> PruneCheckpoints(const std::string& dir,
                                                          int64_t newest_step, int keep_last) {
  const std::vector<CheckpointEntry> entries = ListCheckpoints(dir);
  int complete_newer = 0;  // complete checkpoints at or after the one looked at, up to newest
  std::vector<std::string> removed;
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    if (it->step > newest_step) continue;  // not ours to judge (another writer's future)
    bool remove = false;
    if (it->complete) {
      ++complete_newer;
      remove = keep_last > 0 && complete_newer > keep_last;
    } else {
      remove = it->step < newest_step;
    }
    if (!remove) continue;
    std::error_code error;
    fs::remove_all(it->path, error);
    if (error) {
      return absl::DataLossError(
          absl::StrCat("removing the old checkpoint ", it->path, " failed: ", error.message()));
    }
    removed.push_back(it->path);
  }
  if (!removed.empty()) RETURN_IF_ERROR(FsyncDirectory(dir));
  return removed;
}

}  // namespace gpipe

#include "runtime/core/file_ownership.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace gpipe {
namespace {

namespace fs = std::filesystem;

// Bounds the search of a kept directory for hard links to an output (a checkpoint directory holds
// a few step directories of a few shards each).
constexpr int kMaxKeptEntries = 100000;

struct Identity {
  dev_t device = 0;
  ino_t inode = 0;
  nlink_t links = 0;
  bool operator==(const Identity& other) const {
    return device == other.device && inode == other.inode;
  }
};

// The file `path` names after following links; nullopt when it does not exist.
absl::StatusOr<std::optional<Identity>> IdentityOf(const FileRole& file) {
  struct stat info;
  if (::stat(file.path.c_str(), &info) == 0) {
    return std::optional<Identity>(
        Identity{.device = info.st_dev, .inode = info.st_ino, .links = info.st_nlink});
  }
  if (errno == ENOENT || errno == ENOTDIR) return std::optional<Identity>();
  if (errno == ELOOP) {
    return absl::FailedPreconditionError(absl::StrCat(
        file.role, " ", file.path, ": too many levels of symbolic links (a symlink loop)"));
  }
  return absl::FailedPreconditionError(
      absl::StrCat(file.role, " ", file.path, ": cannot stat it: ", std::strerror(errno)));
}

// The absolute path with the links of its existing part resolved, a dangling link's target too
// (a link to a file not written yet names that file).
fs::path Resolved(const std::string& path) {
  std::error_code error;
  fs::path current = fs::absolute(path, error);
  if (error) current = path;
  for (int hops = 0; hops < 40; ++hops) {
    fs::path resolved = fs::weakly_canonical(current, error);
    if (error) return current.lexically_normal();
    if (!fs::is_symlink(resolved, error)) return resolved;
    const fs::path target = fs::read_symlink(resolved, error);
    if (error) return resolved;
    current = target.is_absolute() ? target : resolved.parent_path() / target;
  }
  return current.lexically_normal();
}

// Whether `child` lies strictly below `dir` (both resolved).
bool Below(const fs::path& child, const fs::path& dir) {
  auto c = child.begin();
  for (auto d = dir.begin(); d != dir.end(); ++d, ++c) {
    if (d->empty()) continue;  // a trailing separator
    if (c == child.end() || *c != *d) return false;
  }
  return c != child.end();
}

absl::Status SameFile(const FileRole& output, const FileRole& other, bool other_is_output) {
  if (other_is_output) {
    return absl::FailedPreconditionError(absl::StrCat(output.role, " and ", other.role,
                                                      " name the same file (", output.path,
                                                      "): each output needs a file of its own"));
  }
  return absl::FailedPreconditionError(
      absl::StrCat(output.role, " ", output.path, " is the same file as ", other.role, " (",
                   other.path, "): an output never replaces a file the run reads"));
}

// `output` (whose identity is `id`, when it exists) against the kept directory `dir`.
absl::Status CheckAgainstKeptDir(const FileRole& output, const std::optional<Identity>& id,
                                 const FileRole& dir) {
  const fs::path resolved_dir = Resolved(dir.path);
  const fs::path resolved = Resolved(output.path);
  if (resolved == resolved_dir || Below(resolved, resolved_dir)) {
    return absl::FailedPreconditionError(absl::StrCat(
        output.role, " ", output.path, " is inside ", dir.role, " (", dir.path, "): gpipe ",
        "never writes an output where it keeps checkpoints; choose a path outside it"));
  }
  if (!id.has_value() || id->links < 2) return absl::OkStatus();
  // A hard link to a file inside the directory: look for it there.
  std::error_code error;
  fs::recursive_directory_iterator it(resolved_dir, error), end;
  for (int seen = 0; !error && it != end && seen < kMaxKeptEntries; it.increment(error), ++seen) {
    struct stat info;
    if (::lstat(it->path().c_str(), &info) != 0 || !S_ISREG(info.st_mode)) continue;
    if (Identity{.device = info.st_dev, .inode = info.st_ino} == *id) {
      return absl::FailedPreconditionError(absl::StrCat(
          output.role, " ", output.path, " is a hard link to ", it->path().string(), " inside ",
          dir.role, ": writing it would destroy that file; choose another path"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckOutput(const RunFiles& files, const FileRole& output, size_t outputs_before) {
  absl::StatusOr<std::optional<Identity>> id = IdentityOf(output);
  if (!id.ok()) return id.status();
  if (id->has_value()) {
    for (const FileRole& input : files.inputs) {
      if (input.path.empty()) continue;
      absl::StatusOr<std::optional<Identity>> other = IdentityOf(input);
      if (other.ok() && other->has_value() && **other == **id) {
        return SameFile(output, input, /*other_is_output=*/false);
      }
    }
  }
  for (size_t i = 0; i < outputs_before; ++i) {
    const FileRole& other = files.outputs[i];
    if (other.path.empty()) continue;
    absl::StatusOr<std::optional<Identity>> other_id = IdentityOf(other);
    const bool same = (id->has_value() && other_id.ok() && other_id->has_value())
                          ? **other_id == **id
                          : Resolved(other.path) == Resolved(output.path);
    if (same) return SameFile(output, other, /*other_is_output=*/true);
  }
  for (const FileRole& dir : files.kept_dirs) {
    if (dir.path.empty()) continue;
    if (absl::Status kept = CheckAgainstKeptDir(output, *id, dir); !kept.ok()) return kept;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckRunFiles(const RunFiles& files) {
  for (size_t i = 0; i < files.outputs.size(); ++i) {
    if (files.outputs[i].path.empty()) continue;
    if (absl::Status checked = CheckOutput(files, files.outputs[i], i); !checked.ok()) {
      return checked;
    }
  }
  return absl::OkStatus();
}

absl::Status CheckLaterOutput(const RunFiles& files, const FileRole& output) {
  RunFiles with = files;
  std::erase_if(with.outputs, [&output](const FileRole& other) {
    return other.role == output.role && other.path == output.path;
  });
  with.outputs.push_back(output);
  return CheckOutput(with, output, with.outputs.size() - 1);
}

}  // namespace gpipe

#include "runtime/core/output_path.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace gpipe {
namespace {

// The directory a path's file lives in ("." for a bare name).
std::string ParentOf(const std::string& path) {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

absl::Status CheckWritableDirectory(absl::string_view what, const std::string& path,
                                    const std::string& dir) {
  struct stat info;
  if (::stat(dir.c_str(), &info) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", path, ": the directory ", dir,
                                                   " does not exist (", std::strerror(errno), ")"));
  }
  if (!S_ISDIR(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", path, ": ", dir, " is ", FileKindName(info.st_mode), ", not a directory"));
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", path, ": the directory ", dir, " is not writable"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string FileKindName(unsigned mode) {
  switch (mode & S_IFMT) {
    case S_IFREG:
      return "a regular file";
    case S_IFDIR:
      return "a directory";
    case S_IFCHR:
      return "a character device";
    case S_IFBLK:
      return "a block device";
    case S_IFIFO:
      return "a FIFO";
    case S_IFSOCK:
      return "a socket";
    case S_IFLNK:
      return "a symbolic link";
    default:
      return "a special file";
  }
}

absl::Status CheckReplaceable(const std::string& path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat("cannot stat ", path, ": ", std::strerror(errno)));
  }
  if (S_ISREG(info.st_mode)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(path, " is ", FileKindName(info.st_mode),
                                                    "; gpipe replaces only regular files"));
}

absl::Status CheckOutputFile(absl::string_view what, const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": the path is empty"));
  if (absl::Status replaceable = CheckReplaceable(path); !replaceable.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(what, ": ", replaceable.message()));
  }
  std::error_code error;
  std::string target = path;
  if (std::filesystem::is_symlink(path, error)) {
    target = std::filesystem::weakly_canonical(path, error).string();
  }
  return CheckWritableDirectory(what, path, ParentOf(target));
}

absl::Status CheckOutputDirectory(absl::string_view what, const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": the path is empty"));
  struct stat info;
  if (::stat(dir.c_str(), &info) == 0) {
    if (!S_ISDIR(info.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, ": ", dir, " is ", FileKindName(info.st_mode), ", not a directory"));
    }
    if (::access(dir.c_str(), W_OK | X_OK) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", dir, " is not writable"));
    }
    return absl::OkStatus();
  }
  if (errno == ELOOP) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": ", dir, ": too many levels of symbolic links (a symlink loop)"));
  }
  // Created with its missing parents (mkdir -p) when first written: the nearest existing
  // ancestor must be a writable directory.
  std::filesystem::path ancestor = std::filesystem::absolute(dir).lexically_normal();
  if (!ancestor.has_filename()) ancestor = ancestor.parent_path();  // a trailing separator
  struct stat found;
  do {
    ancestor = ancestor.parent_path();
  } while (::stat(ancestor.c_str(), &found) != 0 && errno == ENOENT &&
           ancestor.has_relative_path());
  return CheckWritableDirectory(what, dir, ancestor.string());
}

}  // namespace gpipe

#include "runtime/ckpt/path_status.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace gpipe {

bool PathStatus::is_regular() const { return exists && S_ISREG(mode); }
bool PathStatus::is_directory() const { return exists && S_ISDIR(mode); }

absl::Status SymlinkLoopError(const std::string& path) {
  return absl::FailedPreconditionError(
      absl::StrCat(path, ": too many levels of symbolic links (a symlink loop)"));
}

absl::StatusOr<PathStatus> StatPath(const std::string& path, FollowLinks follow) {
  struct stat info;
  const int result =
      follow == FollowLinks::kYes ? ::stat(path.c_str(), &info) : ::lstat(path.c_str(), &info);
  if (result == 0) return PathStatus{.exists = true, .mode = info.st_mode, .size = info.st_size};
  if (errno == ENOENT || errno == ENOTDIR) return PathStatus{};
  if (errno == ELOOP) return SymlinkLoopError(path);
  return absl::FailedPreconditionError(
      absl::StrCat("cannot stat ", path, ": ", std::strerror(errno)));
}

}  // namespace gpipe

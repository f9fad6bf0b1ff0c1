// What is at a path, for checkpoint code that must tell "absent" from "unreachable": a symlink
// loop (ELOOP) or a permission error is reported as such, never as "does not exist" (which is
// what std::filesystem::exists answers for both).
#ifndef GPIPE_RUNTIME_CKPT_PATH_STATUS_H_
#define GPIPE_RUNTIME_CKPT_PATH_STATUS_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace gpipe {

struct PathStatus {
  bool exists = false;  // false: ENOENT or ENOTDIR (nothing there)
  mode_t mode = 0;      // st_mode when it exists
  int64_t size = 0;     // st_size when it exists
  bool is_regular() const;
  bool is_directory() const;
};

enum class FollowLinks { kNo, kYes };

// stat (kYes) or lstat (kNo) of `path`. FAILED_PRECONDITION "<path>: too many levels of symbolic
// links (a symlink loop)" for ELOOP; FAILED_PRECONDITION "cannot stat <path>: <strerror>" for any
// other error than absence.
absl::StatusOr<PathStatus> StatPath(const std::string& path, FollowLinks follow);

// The message StatPath gives for ELOOP, for callers whose open() met one.
absl::Status SymlinkLoopError(const std::string& path);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CKPT_PATH_STATUS_H_

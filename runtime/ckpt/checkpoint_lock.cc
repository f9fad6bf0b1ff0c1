#include "runtime/ckpt/checkpoint_lock.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "runtime/ckpt/checkpoint_layout.h"

namespace gpipe {
namespace {

namespace fs = std::filesystem;

// The longest holder line quoted.
constexpr size_t kMaxHolderBytes = 512;

absl::Status LockError(const std::string& dir, absl::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat("checkpoint.dir ", dir, ": ", what));
}

std::string HolderLine() {
  char host[HOST_NAME_MAX + 1] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "unknown");
  return absl::StrCat("host=", host, " pid=", ::getpid(), " started=",
                      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone()));
}

// The holder's line as the lock file holds it, or "holder unknown".
std::string ReadHolder(int fd) {
  char buffer[kMaxHolderBytes];
  ssize_t got;
  do {
    got = ::pread(fd, buffer, sizeof(buffer), 0);
  } while (got < 0 && errno == EINTR);
  if (got <= 0) return "holder unknown";
  absl::string_view line(buffer, static_cast<size_t>(got));
  line = absl::StripAsciiWhitespace(line.substr(0, line.find('\n')));
  return line.empty() ? "holder unknown" : std::string(line);
}

bool WriteHolder(int fd, const std::string& line) {
  if (::ftruncate(fd, 0) != 0) return false;
  const std::string text = line + "\n";
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t wrote = ::pwrite(fd, text.data() + done, text.size() - done, done);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) return false;
    done += static_cast<size_t>(wrote);
  }
  return ::fsync(fd) == 0;
}

}  // namespace

absl::StatusOr<CheckpointDirLock> CheckpointDirLock::Acquire(const std::string& dir) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) return LockError(dir, absl::StrCat("cannot create it (", error.message(), ")"));
  const std::string path = (fs::path(dir) / kCheckpointLockFile).string();
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    return LockError(
        dir, absl::StrCat("cannot open the lock file ", path, " (", std::strerror(errno), ")"));
  }
  CheckpointDirLock lock(fd, path, HolderLine());  // closes fd on every path out
  int locked;
  do {
    locked = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (locked != 0 && errno == EINTR);
  if (locked != 0) {
    if (errno == EWOULDBLOCK) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint.dir ", dir, " is in use by another job (", ReadHolder(fd),
                       "): two jobs must not share a checkpoint directory; give this run its own "
                       "checkpoint.dir or stop the other job"));
    }
    return LockError(
        dir, absl::StrCat("locking ", path, " failed (", std::strerror(errno),
                          "): the file system does not support locking, so whether another job "
                          "uses this directory could not be checked; put checkpoint.dir on a "
                          "file system that supports them"));
  }
  if (!WriteHolder(fd, lock.holder_)) {
    return LockError(
        dir, absl::StrCat("cannot write the lock file ", path, " (", std::strerror(errno), ")"));
  }
  return lock;
}

CheckpointDirLock::CheckpointDirLock(CheckpointDirLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      path_(std::move(other.path_)),
      holder_(std::move(other.holder_)) {}

CheckpointDirLock& CheckpointDirLock::operator=(CheckpointDirLock&& other) noexcept {
  if (this != &other) {
    Release();
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    holder_ = std::move(other.holder_);
  }
  return *this;
}

CheckpointDirLock::~CheckpointDirLock() { Release(); }

void CheckpointDirLock::Release() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace gpipe

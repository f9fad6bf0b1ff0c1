#include "runtime/ckpt/checkpoint_probe.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/ckpt/path_status.h"
#include "runtime/core/output_path.h"

namespace gpipe {
namespace {

namespace fs = std::filesystem;

absl::Status CannotDo(const std::string& dir, absl::string_view step, absl::string_view reason) {
  return absl::FailedPreconditionError(
      absl::StrCat("checkpoint.dir ", dir, ": cannot ", step, " (", reason, ")"));
}

// The probe's files: it removes whichever of its names exists when it ends, and closes its file.
class ProbeFiles {
 public:
  explicit ProbeFiles(const std::string& dir) {
    const std::string name = absl::StrFormat(".probe.%d.%016x", ::getpid(),
                                             std::uniform_int_distribution<uint64_t>()(random_));
    created_ = (fs::path(dir) / name).string();
    renamed_ = created_ + ".renamed";
  }
  ~ProbeFiles() {
    if (fd_ >= 0) ::close(fd_);
    ::unlink(created_.c_str());
    ::unlink(renamed_.c_str());
  }
  ProbeFiles(const ProbeFiles&) = delete;
  ProbeFiles& operator=(const ProbeFiles&) = delete;

  const std::string& created() const { return created_; }
  const std::string& renamed() const { return renamed_; }
  int& fd() { return fd_; }

 private:
  std::random_device random_;
  std::string created_;
  std::string renamed_;
  int fd_ = -1;
};

}  // namespace

absl::Status ProbeCheckpointDirectory(const std::string& dir) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) return CannotDo(dir, "create it", error.message());
  absl::StatusOr<PathStatus> found = StatPath(dir, FollowLinks::kYes);
  if (!found.ok()) return CannotDo(dir, "examine it", found.status().message());
  if (!found->is_directory()) {
    return CannotDo(dir, "create it", absl::StrCat("it is ", FileKindName(found->mode)));
  }
  ProbeFiles probe(dir);
  const auto fail = [&](absl::string_view step) {
    return CannotDo(dir, step, std::strerror(errno));
  };
  probe.fd() = ::open(probe.created().c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (probe.fd() < 0) return fail("create a file in it");
  ssize_t written;
  do {
    written = ::write(probe.fd(), "x", 1);
  } while (written < 0 && errno == EINTR);
  if (written != 1)
    return written < 0 ? fail("write a file in it")
                       : CannotDo(dir, "write a file in it", "nothing written");
  if (::fsync(probe.fd()) != 0) return fail("fsync a file in it");
  const int fd = probe.fd();
  probe.fd() = -1;
  if (::close(fd) != 0) return fail("close a file in it");
  if (::rename(probe.created().c_str(), probe.renamed().c_str()) != 0) {
    return fail("rename a file in it");
  }
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return fail("open it to fsync it");
  const bool synced = ::fsync(dir_fd) == 0 || errno == EINVAL;
  const int fsync_errno = errno;
  ::close(dir_fd);
  if (!synced) return CannotDo(dir, "fsync it", std::strerror(fsync_errno));
  if (::unlink(probe.renamed().c_str()) != 0) return fail("remove a file in it");
  return absl::OkStatus();
}

}  // namespace gpipe

#include "runtime/core/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "runtime/core/output_path.h"

namespace gpipe {
namespace {

// Closes a descriptor on every path out.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  // Closes now, reporting close's own failure (buffered write errors surface there on NFS).
  bool Close() {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }

 private:
  int fd_;
};

bool WriteAll(int fd, const char* bytes, size_t size) {
  while (size > 0) {
    const ssize_t written = ::write(fd, bytes, size);
    if (written < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (written == 0) {
      errno = EIO;
      return false;
    }
    bytes += written;
    size -= static_cast<size_t>(written);
  }
  return true;
}

std::string ErrnoText() { return std::strerror(errno); }

}  // namespace

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  const int raw = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (raw < 0) return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", ErrnoText()));
  FileDescriptor fd(raw);
  struct stat info;
  if (::fstat(fd.get(), &info) != 0) {
    return absl::DataLossError(absl::StrCat("cannot stat ", path, ": ", ErrnoText()));
  }
  if (!S_ISREG(info.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is ", FileKindName(info.st_mode), ", not a regular file"));
  }
  std::string bytes(static_cast<size_t>(info.st_size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t got = ::read(fd.get(), bytes.data() + done, bytes.size() - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      return absl::DataLossError(absl::StrCat("reading ", path, " failed: ", ErrnoText()));
    }
    if (got == 0) {
      return absl::DataLossError(absl::StrCat("reading ", path, " failed: the file shrank from ",
                                              bytes.size(), " to ", done,
                                              " bytes while it was read"));
    }
    done += static_cast<size_t>(got);
  }
  return bytes;
}

absl::Status WriteFileAtomically(const std::string& path,
                                 std::span<const absl::string_view> pieces) {
  // A link is followed, so that the link stays and its target is replaced.
  std::error_code error;
  std::string target = path;
  if (std::filesystem::is_symlink(path, error)) {
    target = std::filesystem::weakly_canonical(path, error).string();
    if (error) {
      return absl::DataLossError(
          absl::StrCat("writing ", path, " failed: cannot follow the link: ", error.message()));
    }
  }
  if (absl::Status replaceable = CheckReplaceable(target); !replaceable.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("refusing to write ", path, ": ", replaceable.message()));
  }
  std::string tmp_path = target + ".tmp.XXXXXX";
  const int raw = ::mkstemp(tmp_path.data());
  if (raw < 0) {
    return absl::DataLossError(absl::StrCat(
        "writing ", path, " failed: cannot create a temporary file beside it: ", ErrnoText(),
        " (does the directory exist, writable?)"));
  }
  FileDescriptor fd(raw);
  // The first failing step names itself and errno; the temporary file is removed.
  const auto fail = [&](const char* step) {
    const std::string reason = ErrnoText();
    ::unlink(tmp_path.c_str());
    return absl::DataLossError(
        absl::StrCat("writing ", path, " failed (", step, " ", tmp_path, "): ", reason));
  };
  if (::fchmod(fd.get(), 0644) != 0) return fail("chmod");
  for (absl::string_view piece : pieces) {
    if (!WriteAll(fd.get(), piece.data(), piece.size())) return fail("write");
  }
  if (::fsync(fd.get()) != 0) return fail("fsync");
  if (!fd.Close()) return fail("close");
  if (::rename(tmp_path.c_str(), target.c_str()) != 0) return fail("rename");
  return FsyncDirectory(std::filesystem::path(target).parent_path().string());
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) {
  return WriteFileAtomically(path, std::span<const absl::string_view>(&contents, 1));
}

absl::Status FsyncDirectory(const std::string& dir) {
  const std::string name = dir.empty() ? "." : dir;
  const int raw = ::open(name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (raw < 0) {
    return absl::DataLossError(absl::StrCat("cannot open directory ", name, ": ", ErrnoText()));
  }
  FileDescriptor fd(raw);
  if (::fsync(fd.get()) != 0 && errno != EINVAL) {
    return absl::DataLossError(absl::StrCat("fsync of directory ", name, " failed: ", ErrnoText()));
  }
  return absl::OkStatus();
}

}  // namespace gpipe

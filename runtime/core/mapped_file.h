// MappedFile: a regular file mapped read-only into memory for as long as the object lives, so a
// reader touches only the pages it reads (a corpus of many gigabytes costs nothing to open).
#ifndef GPIPE_RUNTIME_CORE_MAPPED_FILE_H_
#define GPIPE_RUNTIME_CORE_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "absl/status/statusor.h"

namespace gpipe {

class MappedFile {
 public:
  // NOT_FOUND naming the path when it cannot be opened; FAILED_PRECONDITION naming what it is
  // when it is not a regular file (a FIFO is refused without waiting for a writer); INTERNAL
  // with errno's text when mapping fails. An empty file maps to no bytes.
  static absl::StatusOr<MappedFile> Open(const std::string& path);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

  // Tells the kernel that [offset, offset + length) will not be read again soon, so a pass over
  // a large file does not keep every page it touched resident in this process.
  void Release(size_t offset, size_t length) const;

 private:
  MappedFile(std::string path, const std::byte* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  void Unmap();

  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CORE_MAPPED_FILE_H_

// TokenFile: a flat file of little-endian token ids of one width (data.tokens), memory-mapped.
#ifndef GPIPE_RUNTIME_DATA_TOKEN_FILE_H_
#define GPIPE_RUNTIME_DATA_TOKEN_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/plan.pb.h"
#include "runtime/core/mapped_file.h"

namespace gpipe {

class TokenFile {
 public:
  // Bytes per id of `dtype` (2 or 4).
  static int Width(pb::TokenDType dtype);

  // Maps `path`. INVALID_ARGUMENT naming the file when its size is not a whole number of ids;
  // the errors of MappedFile::Open otherwise.
  static absl::StatusOr<TokenFile> Open(const std::string& path, pb::TokenDType dtype);

  const std::string& path() const { return file_.path(); }
  int64_t size() const { return size_; }  // ids in the file

  // Copies ids [first, first + count) into `out` as int64 (the caller keeps within size()).
  void Read(int64_t first, int64_t count, int64_t* out) const;

  // OK when every id is below `bound`; otherwise INVALID_ARGUMENT naming the file, the first
  // offending id's offset (in ids and bytes), its value and `why` (what sets the bound). Reads
  // the file in pieces of a few MiB and releases each, so memory stays flat for any file size.
  absl::Status CheckIdsBelow(int64_t bound, const std::string& why) const;

 private:
  TokenFile(MappedFile file, int width)
      : file_(std::move(file)),
        width_(width),
        size_(static_cast<int64_t>(file_.bytes().size()) / width) {}

  MappedFile file_;
  int width_;
  int64_t size_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DATA_TOKEN_FILE_H_

// IDX files (the MNIST format, LeCun et al.): two zero bytes, an element type code, the number
// of dimensions, each dimension as a big-endian uint32, then the elements in C order. Read
// through zlib, so plain and gzip-compressed files (detected from the content) both work. Only
// unsigned bytes (type 0x08, the type of MNIST and Fashion-MNIST) are supported.
#ifndef GPIPE_RUNTIME_DATA_IDX_H_
#define GPIPE_RUNTIME_DATA_IDX_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpipe {

struct IdxArray {
  std::vector<int64_t> dims;  // e.g. [60000, 28, 28] for images, [60000] for labels
  std::vector<uint8_t> data;  // the product of dims elements, C order
};

// Reads a whole IDX file, decompressing gzip. NOT_FOUND when it cannot be opened; DATA_LOSS when
// reading or decompressing fails part-way; INVALID_ARGUMENT for a bad magic, an element type
// other than 0x08, a truncated file (naming the expected and the present bytes), bytes after
// the data, a header declaring more than 16 GiB (nothing more is read then) or a path that is not
// a regular file. Every message names the file.
absl::StatusOr<IdxArray> ReadIdx(const std::string& path);

// Parses the (decompressed) bytes of an IDX file; `source` names it in messages.
absl::StatusOr<IdxArray> ParseIdx(absl::string_view bytes, const std::string& source);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DATA_IDX_H_

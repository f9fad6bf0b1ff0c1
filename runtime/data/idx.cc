#include "runtime/data/idx.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runtime/core/output_path.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

constexpr uint8_t kUnsignedByteType = 0x08;
constexpr size_t kPrefixBytes = 4;  // two zero bytes, the type code, the number of dimensions
constexpr unsigned kReadChunkBytes = 1u << 20;
// The largest IDX file read (decompressed): Fashion-MNIST's training images are 47 MB.
constexpr uint64_t kMaxIdxBytes = uint64_t{16} << 30;

struct GzCloser {
  void operator()(gzFile file) const { gzclose(file); }
};
using GzFilePtr = std::unique_ptr<gzFile_s, GzCloser>;

// The IDX element types (for naming an unsupported one).
const char* TypeName(uint8_t code) {
  switch (code) {
    case 0x08:
      return "unsigned byte";
    case 0x09:
      return "signed byte";
    case 0x0B:
      return "int16";
    case 0x0C:
      return "int32";
    case 0x0D:
      return "float32";
    case 0x0E:
      return "float64";
    default:
      return "not an IDX type";
  }
}

std::string Hex(uint8_t byte) { return absl::StrFormat("0x%02X", byte); }

std::string DimsString(const std::vector<int64_t>& dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

absl::Status Invalid(const std::string& source, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", problem));
}

// The decompressed bytes of `path` (plain files pass through) and whether a gzip stream ended
// before its trailer.
struct Decompressed {
  std::string bytes;
  bool gzip_truncated = false;
};

// The whole (decompressed) size the header declares, once `bytes` hold the header; nullopt
// before that, or when the header is not one ParseIdx accepts (it then says why).
std::optional<uint64_t> DeclaredBytes(absl::string_view bytes) {
  if (bytes.size() < kPrefixBytes || bytes[0] != 0 || bytes[1] != 0) return std::nullopt;
  const size_t rank = static_cast<uint8_t>(bytes[3]);
  const size_t header_bytes = kPrefixBytes + 4 * rank;
  if (rank == 0 || bytes.size() < header_bytes) return std::nullopt;
  uint64_t elements = 1;
  for (size_t d = 0; d < rank; ++d) {
    const auto* at = reinterpret_cast<const uint8_t*>(bytes.data()) + kPrefixBytes + 4 * d;
    const uint64_t dim = (uint64_t{at[0]} << 24) | (uint64_t{at[1]} << 16) |
                         (uint64_t{at[2]} << 8) | uint64_t{at[3]};
    if (__builtin_mul_overflow(elements, dim, &elements)) return std::nullopt;
  }
  return elements > std::numeric_limits<uint64_t>::max() - header_bytes
             ? std::nullopt
             : std::optional<uint64_t>(header_bytes + elements);
}

// Reads at most what the header declares plus one chunk (so trailing bytes are still seen), and
// nothing from a file whose header declares more than kMaxIdxBytes: a corrupt header or a
// gzip bomb cannot exhaust memory.
absl::StatusOr<Decompressed> ReadDecompressed(const std::string& path) {
  struct stat info;
  if (::stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is ", FileKindName(info.st_mode), ", not a regular file"));
  }
  errno = 0;
  GzFilePtr file(gzopen(path.c_str(), "rb"));
  if (file == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ",
                                            errno != 0 ? std::strerror(errno) : "out of memory"));
  }
  Decompressed result;
  std::optional<uint64_t> declared;
  while (true) {
    const size_t old_size = result.bytes.size();
    result.bytes.resize(old_size + kReadChunkBytes);
    const int got = gzread(file.get(), result.bytes.data() + old_size, kReadChunkBytes);
    if (got < 0) {
      int code = Z_OK;
      const char* message = gzerror(file.get(), &code);
      return absl::DataLossError(absl::StrCat(
          "reading ", path, " failed: ", code == Z_ERRNO ? std::strerror(errno) : message));
    }
    result.bytes.resize(old_size + static_cast<size_t>(got));
    if (static_cast<unsigned>(got) < kReadChunkBytes) break;
    if (!declared.has_value()) {
      declared = DeclaredBytes(result.bytes);
      if (declared.has_value() && *declared > kMaxIdxBytes) {
        return Invalid(path, absl::StrCat("the header declares ", *declared,
                                          " bytes, more than gpipe reads from an IDX file (",
                                          kMaxIdxBytes, ")"));
      }
    }
    if (declared.has_value() && result.bytes.size() > *declared) break;
  }
  int code = Z_OK;
  gzerror(file.get(), &code);
  result.gzip_truncated = code == Z_BUF_ERROR;
  return result;
}

}  // namespace

absl::StatusOr<IdxArray> ParseIdx(absl::string_view bytes, const std::string& source) {
  const auto byte_at = [&](size_t i) { return static_cast<uint8_t>(bytes[i]); };
  if (bytes.size() < kPrefixBytes) {
    return Invalid(source, absl::StrCat("truncated: an IDX header needs at least ", kPrefixBytes,
                                        " bytes but the file has ", bytes.size()));
  }
  if (byte_at(0) != 0 || byte_at(1) != 0) {
    return Invalid(source,
                   absl::StrCat("not an IDX file: it starts with ", Hex(byte_at(0)), " ",
                                Hex(byte_at(1)), " but an IDX file starts with two zero bytes"));
  }
  const uint8_t type = byte_at(2);
  if (type != kUnsignedByteType) {
    return Invalid(source, absl::StrCat("IDX element type ", Hex(type), " (", TypeName(type),
                                        ") is not supported; only unsigned bytes (type 0x08) are"));
  }
  const size_t rank = byte_at(3);
  if (rank == 0) return Invalid(source, "the IDX header declares 0 dimensions; it needs >= 1");
  const size_t header_bytes = kPrefixBytes + 4 * rank;
  if (bytes.size() < header_bytes) {
    return Invalid(
        source, absl::StrCat("truncated: the header declares ", rank, " dimension(s), which need ",
                             header_bytes, " header bytes, but the file has only ", bytes.size()));
  }
  IdxArray array;
  int64_t elements = 1;
  for (size_t d = 0; d < rank; ++d) {
    const size_t at = kPrefixBytes + 4 * d;
    const int64_t dim = (int64_t{byte_at(at)} << 24) | (int64_t{byte_at(at + 1)} << 16) |
                        (int64_t{byte_at(at + 2)} << 8) | int64_t{byte_at(at + 3)};
    array.dims.push_back(dim);
    if (__builtin_mul_overflow(elements, dim, &elements)) {
      return Invalid(source, absl::StrCat("dimensions ", DimsString(array.dims),
                                          "... have too many elements to count in 64 bits"));
    }
  }
  const size_t data_bytes = bytes.size() - header_bytes;
  if (data_bytes < static_cast<uint64_t>(elements)) {
    return Invalid(
        source, absl::StrCat("truncated: dimensions ", DimsString(array.dims), " need ", elements,
                             " bytes of data but only ", data_bytes, " follow the header"));
  }
  if (data_bytes > static_cast<uint64_t>(elements)) {
    return Invalid(
        source, absl::StrCat(data_bytes - elements, " unexpected bytes after the data (dimensions ",
                             DimsString(array.dims), " need ", elements, " bytes)"));
  }
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data()) + header_bytes;
  array.data.assign(data, data + elements);
  return array;
}

absl::StatusOr<IdxArray> ReadIdx(const std::string& path) {
  ASSIGN_OR_RETURN(Decompressed file, ReadDecompressed(path));
  absl::StatusOr<IdxArray> array = ParseIdx(file.bytes, path);
  if (!file.gzip_truncated) return array;
  if (!array.ok()) {
    return absl::Status(array.status().code(),
                        absl::StrCat(array.status().message(), " (the gzip stream ends early)"));
  }
  return Invalid(path, "the gzip stream ends early (its trailer is missing); the file is cut off");
}

}  // namespace gpipe

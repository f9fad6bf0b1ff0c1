#include "runtime/data/npy.h"

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/core/file_io.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

static_assert(std::endian::native == std::endian::little,
              ".npy reading and writing assume a little-endian host");

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

absl::Status Invalid(const std::string& source, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", problem));
}

// The header dictionary, e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }.
struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

// Parses the Python literal dict numpy writes. Accepts exactly the keys descr, fortran_order and
// shape, each once, in any order, with single- or double-quoted keys and strings.
class HeaderParser {
 public:
  HeaderParser(absl::string_view text, const std::string& source) : text_(text), source_(source) {}

  absl::StatusOr<NpyHeader> Parse() {
    NpyHeader header;
    bool have_descr = false, have_fortran = false, have_shape = false;
    SkipSpace();
    if (!Consume('{')) return Error("the header is not a Python dict (no '{')");
    while (true) {
      SkipSpace();
      if (Consume('}')) break;
      ASSIGN_OR_RETURN(std::string key, ParseString());
      SkipSpace();
      if (!Consume(':')) return Error(absl::StrCat("expected ':' after key '", key, "'"));
      SkipSpace();
      if (key == "descr") {
        if (Peek() == '[') {
          return Error(
              "structured dtypes (a list in 'descr') are not supported; save a plain "
              "float32 or int64 array");
        }
        ASSIGN_OR_RETURN(header.descr, ParseString());
        have_descr = true;
      } else if (key == "fortran_order") {
        ASSIGN_OR_RETURN(header.fortran_order, ParseBool());
        have_fortran = true;
      } else if (key == "shape") {
        ASSIGN_OR_RETURN(header.shape, ParseShape());
        have_shape = true;
      } else {
        return Error(absl::StrCat("unexpected key '", key,
                                  "' (a .npy header has descr, fortran_order and shape)"));
      }
      SkipSpace();
      if (Consume(',')) continue;
      SkipSpace();
      if (Consume('}')) break;
      return Error(absl::StrCat("expected ',' or '}' after the value of '", key, "'"));
    }
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected characters after the header dict");
    if (!have_descr || !have_fortran || !have_shape) {
      return Error("the header dict lacks one of 'descr', 'fortran_order', 'shape'");
    }
    return header;
  }

 private:
  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool Consume(char c) {
    if (Peek() != c || pos_ >= text_.size()) return false;
    ++pos_;
    return true;
  }
  bool ConsumeWord(absl::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  absl::Status Error(absl::string_view problem) const {
    return Invalid(source_, absl::StrCat("bad .npy header at character ", pos_, ": ", problem,
                                         " (header: ", std::string(text_), ")"));
  }

  absl::StatusOr<std::string> ParseString() {
    const char quote = Peek();
    if (quote != '\'' && quote != '"') return Error("expected a quoted string");
    ++pos_;
    const size_t end = text_.find(quote, pos_);
    if (end == absl::string_view::npos) return Error("unterminated string");
    std::string value(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return value;
  }

  absl::StatusOr<bool> ParseBool() {
    if (ConsumeWord("True")) return true;
    if (ConsumeWord("False")) return false;
    return Error("expected True or False");
  }

  absl::StatusOr<std::vector<int64_t>> ParseShape() {
    std::vector<int64_t> shape;
    if (!Consume('(')) return Error("expected a tuple for 'shape'");
    while (true) {
      SkipSpace();
      if (Consume(')')) break;
      if (Peek() < '0' || Peek() > '9') return Error("expected a non-negative integer in 'shape'");
      int64_t dim = 0;
      while (Peek() >= '0' && Peek() <= '9') {
        const int digit = Peek() - '0';
        if (dim > (std::numeric_limits<int64_t>::max() - digit) / 10) {
          return Error("a dimension in 'shape' is too large");
        }
        dim = dim * 10 + digit;
        ++pos_;
      }
      Consume('L');  // Python 2 long suffix, as old numpy wrote it.
      shape.push_back(dim);
      SkipSpace();
      if (Consume(',')) continue;
      SkipSpace();
      if (Consume(')')) break;
      return Error("expected ',' or ')' in 'shape'");
    }
    return shape;
  }

  absl::string_view text_;
  const std::string& source_;
  size_t pos_ = 0;
};

std::string ShapeTuple(const std::vector<int64_t>& shape) {
  if (shape.size() == 1) return absl::StrCat("(", shape[0], ",)");
  return absl::StrCat("(", absl::StrJoin(shape, ", "), ")");
}

uint32_t ReadLittleEndian(absl::string_view bytes, size_t offset, int width) {
  uint32_t value = 0;
  for (int i = width - 1; i >= 0; --i) {
    value = (value << 8) | static_cast<uint8_t>(bytes[offset + i]);
  }
  return value;
}
absl::Status WriteNpyBytes(const std::string& path, const Shape& shape, const char* descr,
                           const void* data, size_t element_size, size_t count) {
  for (int64_t d : shape.dims()) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot write ", path, ": negative dimension in ", shape.ToString()));
    }
  }
  if (static_cast<int64_t>(count) != shape.num_elements()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot write ", path, ": shape ",
                                                   shape.ToString(), " needs ",
                                                   shape.num_elements(), " values, got ", count));
  }
  std::string dict =
      absl::StrCat("{'descr': '", descr,
                   "', 'fortran_order': False, 'shape': ", ShapeTuple(shape.dims()), ", }");
  // Version 1.0 has a 2-byte header length; longer headers need 2.0 (4 bytes).
  int major = 1;
  size_t prefix = kMagicLen + 2 + 2;
  size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  if (total - prefix > 0xFFFF) {
    major = 2;
    prefix = kMagicLen + 2 + 4;
    total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  }
  const size_t header_len = total - prefix;
  dict.append(header_len - dict.size() - 1, ' ');
  dict.push_back('\n');

  std::string bytes(kMagic, kMagicLen);
  bytes.push_back(static_cast<char>(major));
  bytes.push_back(0);
  const int width = major == 1 ? 2 : 4;
  for (int i = 0; i < width; ++i)
    bytes.push_back(static_cast<char>((header_len >> (8 * i)) & 0xFF));
  bytes += dict;

  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path,
                                            " for writing: ", std::strerror(errno),
                                            "; check that its directory exists"));
  }
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size();
  if (count > 0) ok = ok && std::fwrite(data, element_size, count, file) == count;
  ok = (std::fclose(file) == 0) && ok;
  if (!ok) {
    return absl::DataLossError(absl::StrCat("writing ", path, " failed: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes, const std::string& source) {
  if (bytes.size() < kMagicLen + 4 || bytes.substr(0, kMagicLen) != kMagic) {
    return Invalid(source,
                   "not a .npy file (it does not start with the magic string \"\\x93NUMPY\")");
  }
  const int major = static_cast<uint8_t>(bytes[kMagicLen]);
  const int minor = static_cast<uint8_t>(bytes[kMagicLen + 1]);
  if (major < 1 || major > 3 || minor != 0) {
    return Invalid(source, absl::StrCat("unsupported .npy format version ", major, ".", minor,
                                        " (gpipe reads 1.0, 2.0 and 3.0)"));
  }
  const int length_width = major == 1 ? 2 : 4;
  const size_t header_start = kMagicLen + 2 + length_width;
  if (bytes.size() < header_start) {
    return Invalid(source, "truncated: the file ends inside the header length");
  }
  const size_t header_len = ReadLittleEndian(bytes, kMagicLen + 2, length_width);
  if (bytes.size() - header_start < header_len) {
    return Invalid(source,
                   absl::StrCat("truncated: the header length is ", header_len, " bytes but only ",
                                bytes.size() - header_start, " follow"));
  }
  HeaderParser parser(bytes.substr(header_start, header_len), source);
  ASSIGN_OR_RETURN(NpyHeader header, parser.Parse());

  if (header.fortran_order) {
    return Invalid(source,
                   "fortran_order is True; gpipe reads C-order arrays only (save "
                   "np.ascontiguousarray(arr) instead)");
  }
  NpyArray array;
  size_t item_size = 0;
  if (header.descr == "<f4") {
    array.dtype = DType::kF32;
    item_size = 4;
  } else if (header.descr == "<i8") {
    array.dtype = DType::kI64;
    item_size = 8;
  } else if (header.descr == "<i4") {
    array.dtype = DType::kI64;
    item_size = 4;
  } else if (!header.descr.empty() && header.descr[0] == '>') {
    return Invalid(source, absl::StrCat("dtype '", header.descr,
                                        "' is big-endian; gpipe reads little-endian arrays "
                                        "(save arr.astype(arr.dtype.newbyteorder('<')))"));
  } else {
    return Invalid(source, absl::StrCat("unsupported dtype '", header.descr,
                                        "'; gpipe reads '<f4' (float32), '<i8' (int64) and "
                                        "'<i4' (int32); convert with arr.astype(np.float32) or "
                                        "arr.astype(np.int64)"));
  }

  int64_t count = 1;
  for (int64_t d : header.shape) {
    if (d != 0 && count > std::numeric_limits<int64_t>::max() / 8 / d) {
      return Invalid(source, absl::StrCat("shape ", ShapeTuple(header.shape), " is too large"));
    }
    count *= d;
  }
  const uint64_t data_bytes = static_cast<uint64_t>(count) * item_size;
  const size_t data_start = header_start + header_len;
  const uint64_t available = bytes.size() - data_start;
  if (available < data_bytes) {
    return Invalid(source, absl::StrCat("truncated: shape ", ShapeTuple(header.shape), " of '",
                                        header.descr, "' needs ", data_bytes,
                                        " bytes of data but only ", available, " follow"));
  }
  if (available > data_bytes) {
    return Invalid(source, absl::StrCat(available - data_bytes,
                                        " unexpected bytes after the array data (shape ",
                                        ShapeTuple(header.shape), " of '", header.descr, "' is ",
                                        data_bytes, " bytes)"));
  }
  array.shape = Shape(header.shape);
  const char* data = bytes.data() + data_start;
  if (header.descr == "<f4") {
    array.f32.resize(count);
    if (count > 0) std::memcpy(array.f32.data(), data, data_bytes);
  } else if (header.descr == "<i8") {
    array.i64.resize(count);
    if (count > 0) std::memcpy(array.i64.data(), data, data_bytes);
  } else {
    array.i64.resize(count);
    for (int64_t i = 0; i < count; ++i) {
      int32_t value;
      std::memcpy(&value, data + 4 * i, 4);
      array.i64[i] = value;
    }
  }
  return array;
}

absl::StatusOr<NpyArray> ReadNpy(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string bytes, ReadWholeFile(path));
  return ParseNpy(bytes, path);
}

absl::Status WriteNpy(const std::string& path, const Shape& shape, std::span<const float> values) {
  return WriteNpyBytes(path, shape, "<f4", values.data(), sizeof(float), values.size());
}

absl::Status WriteNpy(const std::string& path, const Shape& shape,
                      std::span<const int64_t> values) {
  return WriteNpyBytes(path, shape, "<i8", values.data(), sizeof(int64_t), values.size());
}

}  // namespace gpipe

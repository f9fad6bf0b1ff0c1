#include "runtime/ckpt/crc32.h"

#include <algorithm>

#include "zlib.h"

namespace gpipe {

uint32_t Crc32(std::span<const absl::string_view> pieces) {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  for (absl::string_view piece : pieces) {
    // zlib takes at most 4 GiB per call.
    for (size_t done = 0; done < piece.size();) {
      const size_t n = std::min<size_t>(piece.size() - done, size_t{1} << 30);
      crc = ::crc32(crc, reinterpret_cast<const Bytef*>(piece.data() + done), static_cast<uInt>(n));
      done += n;
    }
  }
  return static_cast<uint32_t>(crc);
}

}  // namespace gpipe

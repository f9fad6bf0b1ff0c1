// CRC-32 (zlib's polynomial, as `crc32` and Python's zlib.crc32 compute it) of checkpoint files.
#ifndef GPIPE_RUNTIME_CKPT_CRC32_H_
#define GPIPE_RUNTIME_CKPT_CRC32_H_

#include <cstdint>
#include <span>

#include "absl/strings/string_view.h"

namespace gpipe {

// The CRC-32 of the concatenation of `pieces`.
uint32_t Crc32(std::span<const absl::string_view> pieces);
inline uint32_t Crc32(absl::string_view bytes) {
  return Crc32(std::span<const absl::string_view>(&bytes, 1));
}

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CKPT_CRC32_H_

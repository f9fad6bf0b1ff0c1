// FormatBytes: a byte count as people read it ("512 B", "1.5 KiB", "1.20 MiB", "2.00 GiB"),
// binary units. Used by rank 0's progress line and by gpipe-plan's predictions, so both print
// memory the same way.
#ifndef GPIPE_RUNTIME_CORE_BYTE_FORMAT_H_
#define GPIPE_RUNTIME_CORE_BYTE_FORMAT_H_

#include <cstdint>
#include <string>

namespace gpipe {

// "1.2 MiB"
std::string FormatBytes(int64_t bytes);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CORE_BYTE_FORMAT_H_

// libFuzzer target: .npy bytes through the parser (header dictionary, dtype, shape, sizes).
#include <cstddef>
#include <cstdint>

#include "runtime/data/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)gpipe::ParseNpy(absl::string_view(reinterpret_cast<const char*>(data), size), "fuzz.npy");
  return 0;
}

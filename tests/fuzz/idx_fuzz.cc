// libFuzzer target: IDX bytes through the parser (magic, type, dimensions, sizes).
#include <cstddef>
#include <cstdint>

#include "runtime/data/idx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)gpipe::ParseIdx(absl::string_view(reinterpret_cast<const char*>(data), size), "fuzz.idx");
  return 0;
}

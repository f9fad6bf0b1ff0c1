// libFuzzer target: safetensors bytes (an --init-from file or a checkpoint shard) through the
// parser and its checks.
#include <cstddef>
#include <cstdint>

#include "runtime/ckpt/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)gpipe::ParseSafetensors(absl::string_view(reinterpret_cast<const char*>(data), size),
                                "fuzz.safetensors");
  return 0;
}

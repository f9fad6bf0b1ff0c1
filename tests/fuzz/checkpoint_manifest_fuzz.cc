// libFuzzer target: a checkpoint manifest's text through the strict parser and its consistency
// checks (shard names, tensor entries, counts).
#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/ckpt/checkpoint_manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)gpipe::ParseCheckpointManifest(std::string(reinterpret_cast<const char*>(data), size),
                                       "fuzz/manifest.pbtxt");
  return 0;
}

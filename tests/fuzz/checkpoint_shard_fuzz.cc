// libFuzzer target: a checkpoint shard read back by name. The input is written as the shard of a
// one-shard checkpoint whose manifest carries its true size and CRC-32 and names the tensors the
// input's own header claims (when it parses), so the reader's whole path runs: file checks,
// parsing, the manifest-against-shard comparison.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/ckpt/checkpoint_reader.h"
#include "runtime/ckpt/crc32.h"
#include "runtime/ckpt/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir =
      (std::filesystem::temp_directory_path() / ("gpipe_shard_fuzz_" + std::to_string(getpid())))
          .string();
  std::filesystem::create_directories(dir);
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::ofstream(dir + "/s.safetensors", std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  gpipe::pb::CheckpointManifest manifest;
  manifest.set_format_version(1);
  gpipe::pb::CheckpointShard* shard = manifest.add_shards();
  shard->set_file("s.safetensors");
  shard->set_bytes(static_cast<int64_t>(size));
  shard->set_crc32(gpipe::Crc32(bytes));
  std::vector<std::string> names = {"w"};
  auto parsed = gpipe::ParseSafetensors(bytes, "probe");
  if (parsed.ok() && !parsed->tensors.empty()) names.clear();
  for (const gpipe::NamedTensorData& t :
       parsed.ok() ? parsed->tensors : std::vector<gpipe::NamedTensorData>()) {
    names.push_back(t.name);
  }
  for (size_t i = 0; i < names.size(); ++i) {
    gpipe::pb::CheckpointTensor* entry = manifest.add_tensors();
    entry->set_name(names[i]);
    entry->set_kind(gpipe::pb::CheckpointTensor::PARAMETER);
    entry->set_shard(0);
    // Every other tensor claims a shape of its own, so the mismatch path runs too.
    if (parsed.ok() && i < parsed->tensors.size() && i % 2 == 0) {
      for (int64_t d : parsed->tensors[i].shape) entry->add_shape(d);
    } else {
      entry->add_shape(static_cast<int64_t>(i) + 1);
    }
  }
  (void)gpipe::ReadCheckpointTensors(dir, manifest, names);
  return 0;
}

// Safetensors files (https://huggingface.co/docs/safetensors), the format PyTorch users
// exchange weights in: an 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...,
//  "__metadata__": {"key": "value"}} padded with spaces to a multiple of 8, then the data.
// gpipe writes F32 or BF16 tensors and reads F32, BF16 and F16 ones (as f32); writes are atomic and
// durable (WriteFileAtomically).
#ifndef GPIPE_RUNTIME_CKPT_SAFETENSORS_H_
#define GPIPE_RUNTIME_CKPT_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpipe {

// One host-side F32 tensor: values in C order, values.size() == product(shape).
struct NamedTensorData {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

struct SafetensorsContents {
  std::vector<NamedTensorData> tensors;  // in the order of their data in the file
  std::map<std::string, std::string> metadata;
};

// The largest header gpipe reads (the reference implementation's limit).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

// What a write produced: the file's size and CRC-32 (zlib's).
struct WrittenFile {
  int64_t bytes = 0;
  uint32_t crc32 = 0;
};

// How WriteSafetensors stores the values: F32 as they are, or BF16 rounded to nearest even
// (what Hugging Face's bf16 checkpoints hold).
enum class SafetensorsDtype { kF32, kBF16 };

// Writes `tensors` (data in the given order) and `metadata` to `path` with WriteFileAtomically
// (a crash leaves the old file or the new one; only a regular file is replaced).
// INVALID_ARGUMENT for duplicate or reserved ("__metadata__") names, a shape that does not match
// the value count, or names and metadata that are not valid UTF-8; errors name the tensor.
absl::StatusOr<WrittenFile> WriteSafetensors(const std::string& path,
                                             const std::vector<NamedTensorData>& tensors,
                                             const std::map<std::string, std::string>& metadata,
                                             SafetensorsDtype dtype = SafetensorsDtype::kF32);

// One tensor's place in a safetensors file, as its header gives it.
struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // F32, BF16 or F16
  std::vector<int64_t> shape;
  int64_t count = 0;   // product(shape)
  uint64_t begin = 0;  // [begin, end) within the data section
  uint64_t end = 0;
};

// A file's header, validated: what ParseSafetensors checks, without reading any tensor.
struct SafetensorsLayout {
  std::vector<SafetensorsEntry> entries;  // in data order
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // where the data section starts in the file
};
absl::StatusOr<SafetensorsLayout> ParseSafetensorsLayout(absl::string_view bytes,
                                                         const std::string& source);
// One entry's values as f32; `bytes` is the whole file `layout` was parsed from.
NamedTensorData ReadSafetensorsEntry(absl::string_view bytes, const SafetensorsLayout& layout,
                                     const SafetensorsEntry& entry);

// Reads every tensor of a safetensors file, in data order. Validates the header length,
// the JSON, every entry, offsets inside the data, sizes == product(shape) * 4, and that the
// tensors cover the data without overlaps or gaps. BF16 and F16 tensors are widened to f32
// exactly; other dtypes fail naming tensor and dtype.
absl::StatusOr<std::vector<NamedTensorData>> ReadSafetensors(const std::string& path);
// The same, with the file's __metadata__.
absl::StatusOr<SafetensorsContents> ReadSafetensorsWithMetadata(const std::string& path);
// Parses a whole file held in memory; `source` names it in messages.
absl::StatusOr<SafetensorsContents> ParseSafetensors(absl::string_view bytes,
                                                     const std::string& source);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CKPT_SAFETENSORS_H_

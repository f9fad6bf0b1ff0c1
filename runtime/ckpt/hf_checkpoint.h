// HfCheckpoint: the weights --init-from reads, in the layouts Hugging Face's save_pretrained
// writes: one .safetensors file; a directory holding model.safetensors; or
// model.safetensors.index.json (named, or in the directory) whose weight_map spreads the tensors
// over shards beside it. F32, BF16 and F16 tensors become f32. The files are memory-mapped and
// only the tensors read are touched, so a stage reading its own layers of a large model costs
// the bytes of those layers.
#ifndef GPIPE_RUNTIME_CKPT_HF_CHECKPOINT_H_
#define GPIPE_RUNTIME_CKPT_HF_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "runtime/ckpt/safetensors.h"
#include "runtime/core/mapped_file.h"

namespace gpipe {

class HfCheckpoint {
 public:
  // One tensor and the file that holds it.
  struct Tensor {
    std::string name;
    std::string dtype;
    std::vector<int64_t> shape;
    std::string file;  // the shard's path
  };

  // Resolves `path` and validates every file's header. NOT_FOUND naming the path when it is
  // none of the layouts above (for a directory: which files were looked for); INVALID_ARGUMENT
  // naming the file for a malformed header or index, a tensor in two shards, an index entry its
  // shard lacks, or a shard tensor the index does not list.
  static absl::StatusOr<HfCheckpoint> Open(const std::string& path);

  const std::string& path() const { return path_; }
  // Every tensor, sorted by name.
  const std::vector<Tensor>& tensors() const { return tensors_; }
  const Tensor* Find(const std::string& name) const;

  // The f32 values of `name` (which must be one of tensors()).
  absl::StatusOr<NamedTensorData> Read(const std::string& name) const;

 private:
  struct Shard {
    MappedFile file;
    SafetensorsLayout layout;
  };
  struct Location {
    int shard = 0;
    int entry = 0;   // index in that shard's layout.entries
    int tensor = 0;  // index in tensors_
  };

  HfCheckpoint() = default;
  absl::Status AddShard(MappedFile file);

  std::string path_;
  std::vector<Shard> shards_;
  std::vector<Tensor> tensors_;
  absl::flat_hash_map<std::string, Location> where_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CKPT_HF_CHECKPOINT_H_

// Dataset: indexed samples (inputs and targets) of one split (training or held-out evaluation);
// BatchSampler: which samples each step uses. Both are deterministic functions of the plan and
// seed, so every rank that needs data (the first stage: inputs; the last stage: targets) computes
// the same thing.
#ifndef GPIPE_RUNTIME_TRAIN_DATASET_H_
#define GPIPE_RUNTIME_TRAIN_DATASET_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/plan.pb.h"
#include "runtime/core/dtype.h"
#include "runtime/core/shape.h"
#include "runtime/core/tensor.h"

namespace gpipe {

// The sample index of padding: the tail of the last evaluation batch when the split's size is not
// a multiple of the batch. Gathering it writes zeros.
inline constexpr int64_t kPaddingSample = -1;

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // Per-sample shapes and dtypes.
  virtual const Shape& input_shape() const = 0;
  virtual DType input_dtype() const = 0;
  virtual const Shape& target_shape() const = 0;
  virtual DType target_dtype() const = 0;
  // Fills out[i] with sample indices[i], or with zeros where indices[i] is kPaddingSample. `out`
  // is [indices.size(), shape...] of the right dtype (host-accessible). OUT_OF_RANGE for any other
  // index outside [0, size()).
  virtual absl::Status GatherInputs(std::span<const int64_t> indices, Tensor& out) const = 0;
  virtual absl::Status GatherTargets(std::span<const int64_t> indices, Tensor& out) const = 0;
};

// What the model expects of its data (from shape inference).
struct DataRequirements {
  Shape input_shape;  // per-sample model input
  // model.input.type: f32 features or i64 token ids.
  DType input_dtype = DType::kF32;
  Shape target_shape;  // per-sample target (from the loss)
  DType target_dtype = DType::kF32;
  int64_t num_classes = 0;  // > 0 for classification losses
  uint64_t seed = 0;        // training.seed
  // Which sides the caller will gather (the first stage needs inputs, the last stage targets).
  // Data sources validate both sides at open, then may release the other's memory; gathering a
  // side that was not kept is FAILED_PRECONDITION.
  bool keep_inputs = true;
  bool keep_targets = true;
};

// Which part of the data a Dataset serves: the training samples or the held-out ones.
enum class DataSplit { kTrain, kEval };

class DataSourceRegistry;

// Opens `split` of the plan's data source. Paths in `data` must already be resolved (absolute or
// relative to the working directory). Errors name the file and what is wrong (missing, bad
// header, dtype or shape not matching `requirements`). kEval on a source without a held-out split
// (see HasEvalSplit) is FAILED_PRECONDITION naming the field to set. data.custom is opened
// through `custom` (the embedding program's sources; null: none).
absl::StatusOr<std::unique_ptr<Dataset>> OpenDataset(const pb::Data& data,
                                                     const DataRequirements& requirements,
                                                     DataSplit split = DataSplit::kTrain,
                                                     const DataSourceRegistry* custom = nullptr);

// Whether the source declares a held-out split: npy eval_inputs / eval_targets, synthetic
// eval_samples > 0, idx test_images / test_labels, text eval_fraction > 0, custom eval_split.
bool HasEvalSplit(const pb::Data& data);

// Step s's sample indices: without shuffle, [s*B, (s+1)*B) modulo N in order; with shuffle,
// epoch e = floor(s*B / N) visits a permutation drawn from (seed, e), continuing across
// epoch boundaries. The most recent epoch's permutation is cached (shared by copies of the
// sampler, which compute the same permutations); IndicesForStep is thread-safe.
class BatchSampler {
 public:
  // Requires dataset_size >= 1 and global_batch >= 1 (the plan checker guarantees both).
  BatchSampler(int64_t dataset_size, int64_t global_batch, bool shuffle, uint64_t seed);
  // Requires step >= 0.
  std::vector<int64_t> IndicesForStep(int64_t step) const;

  // The order in which epoch `epoch` visits the samples (the identity without shuffle).
  std::vector<int64_t> EpochPermutation(int64_t epoch) const;

 private:
  struct PermutationCache;

  int64_t dataset_size_;
  int64_t global_batch_;
  bool shuffle_;
  uint64_t seed_;
  std::shared_ptr<PermutationCache> cache_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_TRAIN_DATASET_H_

// Dataset: indexed samples (inputs and targets) of one split (training or held-out evaluation),
// and what the model asks of it (DataRequirements). Every source is a deterministic function of
// the plan and seed, so every rank that needs data (the first stage: inputs; the last stage:
// targets) reads the same thing. OpenDataset (open_dataset.h) picks the source; BatchSampler
// (batch_sampler.h) which samples each step uses.
#ifndef GPIPE_RUNTIME_DATA_DATASET_H_
#define GPIPE_RUNTIME_DATA_DATASET_H_

#include <cstdint>
#include <memory>
#include <span>

#include "absl/status/statusor.h"
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

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DATA_DATASET_H_

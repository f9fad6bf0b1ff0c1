// SyntheticDataset: seeded samples made on demand, each a pure function of (seed, index), so
// any rank computes any sample without the others and batch composition does not matter.
//   classification (requirements.num_classes > 0): one Gaussian cluster per class; the center
//     of class c is N(0, 1) per feature from RandomStream(seed, {kCenterTag, c}); sample i's
//     class comes from a hash of (seed, i); its input is center + noise * N(0, 1).
//   regression (num_classes == 0): inputs x ~ N(0, 1); targets tanh(W x + b) + noise * N(0, 1)
//     from a fixed random teacher (W ~ N(0, 1/D) of [T, D] in float, b ~ N(0, 0.25)) keyed by the
//     seed; W x is summed in float over 16 interleaved lanes, combined in double.
// The evaluation split (eval_samples samples) shares the class centers and the teacher; its
// samples' streams (class, input, target noise) add kEvalSplitTag to their key, so they are
// draws distinct from the training samples of the same index.
#ifndef GPIPE_RUNTIME_DATA_SYNTHETIC_H_
#define GPIPE_RUNTIME_DATA_SYNTHETIC_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/plan.pb.h"
#include "runtime/core/rng.h"
#include "runtime/data/dataset.h"
#include "runtime/data/row_cache.h"

namespace gpipe {

class SyntheticDataset final : public Dataset {
 public:
  // INVALID_ARGUMENT naming the field for num_samples < 1 (eval_samples < 0 for kEval) or a
  // negative noise, and when the requirements ask for data it cannot make (f32 inputs only;
  // classification needs one int64 class id per sample; regression needs f32 targets).
  // FAILED_PRECONDITION for kEval with eval_samples 0.
  static absl::StatusOr<std::unique_ptr<SyntheticDataset>> Create(
      const pb::Synthetic& spec, const DataRequirements& requirements,
      DataSplit split = DataSplit::kTrain);

  int64_t size() const override { return num_samples_; }
  const Shape& input_shape() const override { return input_shape_; }
  DType input_dtype() const override { return DType::kF32; }
  const Shape& target_shape() const override { return target_shape_; }
  DType target_dtype() const override { return target_dtype_; }
  absl::Status GatherInputs(std::span<const int64_t> indices, Tensor& out) const override;
  absl::Status GatherTargets(std::span<const int64_t> indices, Tensor& out) const override;

  bool is_classification() const { return num_classes_ > 0; }
  // The class of sample `index` (classification only; index in [0, size())).
  int64_t ClassOf(int64_t index) const;
  // The center of class `c`'s cluster (classification only), input-shaped, flattened.
  std::vector<float> ClassCenter(int64_t c) const;

 private:
  SyntheticDataset(const pb::Synthetic& spec, const DataRequirements& requirements,
                   DataSplit split);
  // The random stream of sample `index` for `tag`, keyed by the split.
  RandomStream SampleStream(uint64_t tag, int64_t index) const;
  // Writes sample `index`'s input / target into `out` (input / target num_elements floats).
  void FillInput(int64_t index, std::span<float> out) const;
  void FillRegressionTarget(int64_t index, std::span<float> out) const;

  uint64_t seed_;
  DataSplit split_;
  int64_t num_samples_;
  double noise_;
  int64_t num_classes_;
  Shape input_shape_;
  Shape target_shape_;
  DType target_dtype_;
  // Classification: the class centers [num_classes, input features] when they fit in
  // kMaxCachedCenterElements, else empty (each sample then regenerates its center).
  // Regression: the teacher's weight [T, D] and bias [T].
  static constexpr int64_t kMaxCachedCenterElements = int64_t{1} << 24;
  std::vector<float> centers_;
  std::vector<float> teacher_weight_;  // [outputs, features], row-major
  std::vector<double> teacher_bias_;
  // Inputs and regression targets once computed (each sample is a pure function of its index),
  // within kRowCacheBytes each.
  static constexpr int64_t kRowCacheBytes = int64_t{256} << 20;
  RowCache input_rows_;
  RowCache target_rows_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DATA_SYNTHETIC_H_

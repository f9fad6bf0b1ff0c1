// NpyDataset: samples held in host memory from a pair of .npy files, inputs float32
// [N, input shape...] and targets int64 [N] of class ids or float32 [N, target shape...].
// Everything is checked when the files are opened: shapes, dtypes, N, class id range. The
// held-out split is a second pair of files (eval_inputs, eval_targets) in the same formats.
#ifndef GPIPE_RUNTIME_DATA_NPY_DATASET_H_
#define GPIPE_RUNTIME_DATA_NPY_DATASET_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "proto/plan.pb.h"
#include "runtime/data/dataset.h"
#include "runtime/data/npy.h"

namespace gpipe {

class NpyDataset final : public Dataset {
 public:
  // Opens `split`'s pair of files; `spec`'s paths must be resolved already. Errors name the
  // field or file and the shapes involved. kEval without eval files is FAILED_PRECONDITION; one
  // eval file without the other is INVALID_ARGUMENT.
  static absl::StatusOr<std::unique_ptr<NpyDataset>> Open(const pb::Npy& spec,
                                                          const DataRequirements& requirements,
                                                          DataSplit split = DataSplit::kTrain);

  int64_t size() const override { return size_; }
  const Shape& input_shape() const override { return input_shape_; }
  DType input_dtype() const override { return DType::kF32; }
  const Shape& target_shape() const override { return target_shape_; }
  DType target_dtype() const override { return targets_.dtype; }
  absl::Status GatherInputs(std::span<const int64_t> indices, Tensor& out) const override;
  absl::Status GatherTargets(std::span<const int64_t> indices, Tensor& out) const override;

 private:
  NpyDataset(std::string inputs_path, NpyArray inputs, std::string targets_path, NpyArray targets,
             const DataRequirements& requirements);

  std::string inputs_path_;
  std::string targets_path_;
  NpyArray inputs_;
  NpyArray targets_;
  int64_t size_;
  bool keep_inputs_;
  bool keep_targets_;
  Shape input_shape_;
  Shape target_shape_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DATA_NPY_DATASET_H_

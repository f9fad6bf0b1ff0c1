// ShapeOnlyDataset: a data source seen through a simulated device. It opens nothing itself: it
// wraps the real dataset (so sizes, shapes, dtypes and the sampler are the real ones) and its
// Gather calls check the output tensor's shape and dtype and every index, and write nothing
// (the tensors have no storage to write). Thread-compatible.
#ifndef GPIPE_RUNTIME_BACKEND_SIM_SIM_DATASET_H_
#define GPIPE_RUNTIME_BACKEND_SIM_SIM_DATASET_H_

#include <memory>

#include "runtime/data/dataset.h"

namespace gpipe {

class ShapeOnlyDataset final : public Dataset {
 public:
  explicit ShapeOnlyDataset(std::unique_ptr<Dataset> real) : real_(std::move(real)) {}

  int64_t size() const override { return real_->size(); }
  const Shape& input_shape() const override { return real_->input_shape(); }
  DType input_dtype() const override { return real_->input_dtype(); }
  const Shape& target_shape() const override { return real_->target_shape(); }
  DType target_dtype() const override { return real_->target_dtype(); }
  absl::Status GatherInputs(std::span<const int64_t> indices, Tensor& out) const override;
  absl::Status GatherTargets(std::span<const int64_t> indices, Tensor& out) const override;

 private:
  absl::Status Check(const char* what, std::span<const int64_t> indices, const Shape& per_sample,
                     DType dtype, const Tensor& out) const;

  std::unique_ptr<Dataset> real_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_BACKEND_SIM_SIM_DATASET_H_

// IdxDataset: image classification data from a pair of IDX files (MNIST / Fashion-MNIST
// format), images uint8 [N, rows, cols] and labels uint8 [N]. Images become float32 samples of
// the model's input shape, [1, rows, cols] or [rows * cols], with values
// (pixel / 255 - mean) / std; labels are int64 class ids. Both files are read, decompressed and
// checked at open; pixels stay in memory as bytes and are normalized when gathered.
#ifndef GPIPE_RUNTIME_DATA_IDX_DATASET_H_
#define GPIPE_RUNTIME_DATA_IDX_DATASET_H_

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/plan.pb.h"
#include "runtime/data/dataset.h"

namespace gpipe {

class IdxDataset final : public Dataset {
 public:
  // Opens `split`'s files (train_images / train_labels, or test_images / test_labels for kEval);
  // `spec`'s paths must be resolved already. INVALID_ARGUMENT naming the file or field for a
  // loss other than class ids, an input shape the images cannot take, image and label counts
  // that differ, and a label outside [0, num_classes); FAILED_PRECONDITION for kEval without
  // test files.
  static absl::StatusOr<std::unique_ptr<IdxDataset>> Open(const pb::Idx& spec,
                                                          const DataRequirements& requirements,
                                                          DataSplit split = DataSplit::kTrain);

  int64_t size() const override { return size_; }
  const Shape& input_shape() const override { return input_shape_; }
  DType input_dtype() const override { return DType::kF32; }
  const Shape& target_shape() const override { return target_shape_; }
  DType target_dtype() const override { return DType::kI64; }
  absl::Status GatherInputs(std::span<const int64_t> indices, Tensor& out) const override;
  absl::Status GatherTargets(std::span<const int64_t> indices, Tensor& out) const override;

 private:
  IdxDataset() = default;

  std::string images_path_;
  std::string labels_path_;
  int64_t size_ = 0;
  bool keep_inputs_ = true;
  bool keep_targets_ = true;
  Shape input_shape_;
  Shape target_shape_;
  std::vector<uint8_t> pixels_;  // [N, rows * cols]
  std::vector<uint8_t> labels_;  // [N]
  // The normalized value of each pixel byte.
  std::array<float, 256> pixel_values_{};
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DATA_IDX_DATASET_H_

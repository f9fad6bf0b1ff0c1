// TextDataset: byte-level language-model data. The files are concatenated in order and every
// byte is a token id (so the model needs a vocabulary of 256). With T = seq_len (the model input
// [T], int64), the first floor((1 - eval_fraction) * bytes) bytes are the training split and the
// rest the held-out split. Training sample i is the window starting at byte i (every offset, so
// train_len - T samples); held-out sample j starts at train_len + j * T (non-overlapping windows,
// floor((eval_len - 1) / T) samples). A sample's input is bytes [s, s + T) and its target the
// next byte at each position, bytes [s + 1, s + T + 1).
#ifndef GPIPE_RUNTIME_DATA_TEXT_DATASET_H_
#define GPIPE_RUNTIME_DATA_TEXT_DATASET_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "proto/plan.pb.h"
#include "runtime/data/dataset.h"

namespace gpipe {

class TextDataset final : public Dataset {
 public:
  // Reads every file of `spec` (paths resolved already) and opens `split`. INVALID_ARGUMENT
  // naming the field or file for an input that is not int64 [T], targets that are not int64
  // [T] class ids, a byte >= num_classes, or a split too short for one window;
  // FAILED_PRECONDITION for kEval with eval_fraction 0.
  static absl::StatusOr<std::unique_ptr<TextDataset>> Open(const pb::Text& spec,
                                                           const DataRequirements& requirements,
                                                           DataSplit split = DataSplit::kTrain);

  int64_t size() const override { return size_; }
  const Shape& input_shape() const override { return window_shape_; }
  DType input_dtype() const override { return DType::kI64; }
  const Shape& target_shape() const override { return window_shape_; }
  DType target_dtype() const override { return DType::kI64; }
  absl::Status GatherInputs(std::span<const int64_t> indices, Tensor& out) const override;
  absl::Status GatherTargets(std::span<const int64_t> indices, Tensor& out) const override;

  // Offset in the concatenated text of sample `index`'s first input byte.
  int64_t WindowStart(int64_t index) const { return split_offset_ + index * stride_; }

 private:
  TextDataset() = default;
  // Writes the T bytes starting `shift` after sample i's window start, for each index.
  absl::Status Gather(const char* what, int64_t shift, std::span<const int64_t> indices,
                      Tensor& out) const;

  std::string name_;          // for messages: "text data (training split)"
  std::string split_text_;    // the split's bytes
  int64_t split_offset_ = 0;  // where the split starts in the concatenated text
  int64_t stride_ = 1;        // between window starts: 1 (training) or T (held-out)
  int64_t size_ = 0;
  int64_t seq_len_ = 0;
  Shape window_shape_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DATA_TEXT_DATASET_H_

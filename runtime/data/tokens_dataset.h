// TokensDataset (data.tokens): next-token windows (token_windows.h) over a memory-mapped file of
// token ids (token_file.h). Only the windows a step gathers are read from the file.
#ifndef GPIPE_RUNTIME_DATA_TOKENS_DATASET_H_
#define GPIPE_RUNTIME_DATA_TOKENS_DATASET_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "proto/plan.pb.h"
#include "runtime/data/dataset.h"
#include "runtime/data/token_file.h"

namespace gpipe {

class TokensDataset final : public Dataset {
 public:
  // Maps spec.path (resolved already) and opens `split`. INVALID_ARGUMENT naming the field or
  // file for a model that does not take int64 [T] ids with int64 [T] class-id targets, a file
  // that is not a whole number of ids, or a split too short for one window;
  // FAILED_PRECONDITION for kEval with eval_fraction 0. Ids are range-checked by the plan check
  // (the whole file, once) and by the layers' host checks on every loaded micro-batch, not here.
  static absl::StatusOr<std::unique_ptr<TokensDataset>> Open(const pb::Tokens& spec,
                                                             const DataRequirements& requirements,
                                                             DataSplit split = DataSplit::kTrain);

  int64_t size() const override { return size_; }
  const Shape& input_shape() const override { return window_shape_; }
  DType input_dtype() const override { return DType::kI64; }
  const Shape& target_shape() const override { return window_shape_; }
  DType target_dtype() const override { return DType::kI64; }
  absl::Status GatherInputs(std::span<const int64_t> indices, Tensor& out) const override;
  absl::Status GatherTargets(std::span<const int64_t> indices, Tensor& out) const override;

  // Offset in the file, in ids, of sample `index`'s first input token.
  int64_t WindowStart(int64_t index) const { return offset_ + index * stride_; }

 private:
  explicit TokensDataset(TokenFile file) : file_(std::move(file)) {}
  absl::Status Gather(const char* what, int64_t shift, std::span<const int64_t> indices,
                      Tensor& out) const;

  TokenFile file_;
  std::string name_;    // for messages: "token data (training split)"
  int64_t offset_ = 0;  // the split's first token in the file
  int64_t stride_ = 1;  // between window starts: 1 (training) or T (held-out)
  int64_t size_ = 0;
  int64_t seq_len_ = 0;
  Shape window_shape_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DATA_TOKENS_DATASET_H_

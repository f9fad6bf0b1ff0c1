#include "runtime/data/tokens_dataset.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/data/gather_checks.h"
#include "runtime/data/token_windows.h"

namespace gpipe {
namespace {

constexpr TokenSourceNames kTokens{.field = "data.tokens",
                                   .ids = "the file's ids",
                                   .unit = "token",
                                   .class_value = "token id",
                                   .more = "tokens",
                                   .more_eval = "tokens",
                                   .whole = "token file"};

}  // namespace

absl::StatusOr<std::unique_ptr<TokensDataset>> TokensDataset::Open(
    const pb::Tokens& spec, const DataRequirements& requirements, DataSplit split) {
  const double eval_fraction = spec.eval_fraction();
  RETURN_IF_ERROR(CheckEvalFraction(kTokens, eval_fraction, split));
  if (spec.path().empty()) {
    return absl::InvalidArgumentError("data.tokens.path is missing; give the token file");
  }
  RETURN_IF_ERROR(CheckTokenWindowRequirements(kTokens, requirements));
  const int64_t seq_len = requirements.input_shape.dim(0);
  absl::StatusOr<TokenFile> file = TokenFile::Open(spec.path(), spec.dtype());
  if (!file.ok()) return WithContext(file.status(), "data.tokens.path");
  ASSIGN_OR_RETURN(const TokenWindows windows,
                   SplitTokenWindows(kTokens, file->size(), seq_len, eval_fraction, split));
  auto dataset = std::unique_ptr<TokensDataset>(new TokensDataset(std::move(*file)));
  dataset->name_ =
      split == DataSplit::kTrain ? "token data (training split)" : "token data (held-out split)";
  dataset->offset_ = windows.offset;
  dataset->stride_ = windows.stride;
  dataset->size_ = windows.size;
  dataset->seq_len_ = seq_len;
  dataset->window_shape_ = Shape{seq_len};
  return dataset;
}

absl::Status TokensDataset::Gather(const char* what, int64_t shift,
                                   std::span<const int64_t> indices, Tensor& out) const {
  RETURN_IF_ERROR(
      dataset_internal::CheckGather(name_, what, indices, size_, window_shape_, DType::kI64, out));
  dataset_internal::GatherRows(
      indices, seq_len_, out.data<int64_t>(),
      [&](int64_t index, int64_t* to) { file_.Read(WindowStart(index) + shift, seq_len_, to); });
  return absl::OkStatus();
}

absl::Status TokensDataset::GatherInputs(std::span<const int64_t> indices, Tensor& out) const {
  return Gather("inputs", 0, indices, out);
}

absl::Status TokensDataset::GatherTargets(std::span<const int64_t> indices, Tensor& out) const {
  return Gather("targets", 1, indices, out);
}

}  // namespace gpipe

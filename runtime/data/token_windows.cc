#include "runtime/data/token_windows.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace gpipe {
namespace {

// floor((1 - eval_fraction) * total): the length of the training split.
int64_t TrainLength(int64_t total, double eval_fraction) {
  return static_cast<int64_t>(std::floor((1.0 - eval_fraction) * static_cast<double>(total)));
}

// The fewest tokens whose training split holds one window of seq_len.
int64_t TokensForOneTrainingWindow(int64_t seq_len, double eval_fraction) {
  int64_t total =
      static_cast<int64_t>(std::ceil(static_cast<double>(seq_len + 1) / (1.0 - eval_fraction)));
  while (TrainLength(total, eval_fraction) < seq_len + 1) ++total;
  while (total > 1 && TrainLength(total - 1, eval_fraction) >= seq_len + 1) --total;
  return total;
}

}  // namespace

absl::Status CheckEvalFraction(const TokenSourceNames& names, double eval_fraction,
                               DataSplit split) {
  if (!(eval_fraction >= 0 && eval_fraction < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(names.field, ".eval_fraction must be in [0, 1), got ", eval_fraction));
  }
  if (split == DataSplit::kEval && eval_fraction == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(names.field,
                     ".eval_fraction is 0, so there is no held-out split; set it in (0, 1) to "
                     "hold out the end of the ",
                     names.whole));
  }
  return absl::OkStatus();
}

absl::Status CheckTokenWindowRequirements(const TokenSourceNames& names,
                                          const DataRequirements& requirements) {
  if (requirements.input_dtype != DType::kI64) {
    return absl::InvalidArgumentError(absl::StrCat(
        names.field, " gives int64 token ids (", names.ids, ") but the model takes ",
        DTypeName(requirements.input_dtype),
        " inputs; set model.input.type: INT64 (and a first layer that embeds the ids)"));
  }
  if (requirements.input_shape.rank() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        names.field,
        ": a sample is a window of seq_len token ids, so model.input.shape must be [seq_len], "
        "got ",
        requirements.input_shape.ToString()));
  }
  if (requirements.num_classes <= 0 || requirements.target_dtype != DType::kI64 ||
      requirements.target_shape != requirements.input_shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        names.field, ": the targets are the next ", names.unit, " at each position, i64",
        requirements.input_shape.ToString(),
        " class ids, so the loss must be softmax_cross_entropy over one score per ",
        names.class_value, " at each position, but the loss expects ",
        DTypeName(requirements.target_dtype), requirements.target_shape.ToString(), " targets"));
  }
  return absl::OkStatus();
}

absl::StatusOr<TokenWindows> SplitTokenWindows(const TokenSourceNames& names, int64_t total,
                                               int64_t seq_len, double eval_fraction,
                                               DataSplit split) {
  const int64_t train_length = TrainLength(total, eval_fraction);
  const int64_t eval_length = total - train_length;
  const int64_t train_windows = train_length - seq_len;
  if (train_windows < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        names.field, ": the training split has ", train_length, " ", names.unit, "(s) (the first ",
        1 - eval_fraction, " of ", total, ") but a window of seq_len ", seq_len, " needs ",
        seq_len + 1, "; give at least ", TokensForOneTrainingWindow(seq_len, eval_fraction), " ",
        names.more, ", or a smaller seq_len or eval_fraction"));
  }
  if (split == DataSplit::kTrain) {
    return TokenWindows{
        .offset = 0, .stride = 1, .size = train_windows, .split_length = train_length};
  }
  const int64_t eval_windows = eval_length >= 1 ? (eval_length - 1) / seq_len : 0;
  if (eval_windows < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        names.field, ": the held-out split has ", eval_length, " ", names.unit, "(s) (the last ",
        eval_fraction, " of ", total, ") but a window of seq_len ", seq_len, " needs ", seq_len + 1,
        "; raise ", names.field, ".eval_fraction or give more ", names.more_eval));
  }
  return TokenWindows{
      .offset = train_length, .stride = seq_len, .size = eval_windows, .split_length = eval_length};
}

}  // namespace gpipe
